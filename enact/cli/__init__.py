"""The ``enact`` command line. Commands talk to the running daemon through its
control socket; only ``daemon run`` (and ``config show``) work without one."""

from __future__ import annotations

import click

from enact import __version__
from enact.cli import _chat, _commands, _daemon


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="enact")
def main() -> None:
    """enact: a personal software agent that runs as a daemon."""


main.add_command(_daemon.daemon)
for _command in (*_commands.COMMANDS, *_chat.COMMANDS):
    main.add_command(_command)

__all__ = ["main"]
