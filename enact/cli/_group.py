"""The ``enact`` click group. Commands talk to the running daemon through its
control socket; only ``daemon run`` (and ``config show``) work without one.

A command's module is imported only when that command runs (``COMMANDS``
names where each lives), and each command imports the message modules it
needs inside its body: run outside the command server (``enact.cli``), a
command pays for its imports before it talks to the daemon."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from enact import __version__
from enact.cli._options import HOME_HELP, home_type

COMMANDS: dict[str, str] = {
    "backlog": "enact.cli._schedule:backlog",
    "call": "enact.cli._commands:call",
    "channel": "enact.cli._channel:channel_group",
    "config": "enact.cli._commands:config_group",
    "cron": "enact.cli._schedule:cron",
    "daemon": "enact.cli._daemon:daemon",
    "evolve": "enact.cli._evolve:evolve",
    "identity": "enact.cli._identity:identity",
    "memory": "enact.cli._memory:memory",
    "review": "enact.cli._reviews:review",
    "runtime": "enact.cli._runtime:runtime_group",
    "send": "enact.cli._chat:send",
    "status": "enact.cli._commands:status",
    "task": "enact.cli._tasks:task",
    "turns": "enact.cli._chat:turns",
    "worktree": "enact.cli._worktrees:worktree",
}
"""Command name -> ``module:attribute`` of its click command."""


class LazyGroup(click.Group):
    """A group whose commands are imported on first use, so that running one
    command loads neither the others nor what they import."""

    def __init__(self, *args: object, lazy: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._lazy = lazy

    def list_commands(self, context: click.Context) -> list[str]:
        return sorted({*super().list_commands(context), *self._lazy})

    def get_command(self, context: click.Context, name: str) -> click.Command | None:
        target = self._lazy.get(name)
        if target is None:
            return super().get_command(context, name)
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="enact")
@click.option("--home", type=home_type(), default=None, help=f"{HOME_HELP} A command's own --home wins.")
@click.pass_context
def main(context: click.Context, home: Path | None) -> None:
    """enact: a personal software agent that runs as a daemon."""
    context.ensure_object(dict)
    context.obj["home"] = home


__all__ = ["main"]
