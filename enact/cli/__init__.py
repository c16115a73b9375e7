"""The ``enact`` command line. Commands talk to the running daemon through its
control socket; only ``daemon run`` (and ``config show``) work without one.

Each command imports the message modules it needs inside its body, so that
``enact --version`` and ``--help`` load no more than click."""

from __future__ import annotations

from pathlib import Path

import click

from enact import __version__
from enact.cli import _chat, _commands, _daemon, _reviews, _schedule, _tasks, _worktrees
from enact.cli._options import HOME_HELP, home_type


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="enact")
@click.option("--home", type=home_type(), default=None, help=f"{HOME_HELP} A command's own --home wins.")
@click.pass_context
def main(context: click.Context, home: Path | None) -> None:
    """enact: a personal software agent that runs as a daemon."""
    context.ensure_object(dict)
    context.obj["home"] = home


main.add_command(_daemon.daemon)
for _command in (*_commands.COMMANDS, *_chat.COMMANDS, *_tasks.COMMANDS, *_reviews.COMMANDS,
                 *_schedule.COMMANDS, *_worktrees.COMMANDS):
    main.add_command(_command)

__all__ = ["main"]
