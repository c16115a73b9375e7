"""The ``enact`` click group. Commands talk to the running daemon through its
control socket; only ``daemon run`` (and ``config show``) work without one.

A command's module is imported only when that command runs (each
component names where its commands live: ``Component.cli``), and each command imports the message modules it
needs inside its body: run outside the command server (``enact.cli``), a
command pays for its imports before it talks to the daemon."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from pathlib import Path

import click

from enact import __version__
from enact.cli._options import EXIT_USAGE, HOME_HELP, home_type


def _commands() -> dict[str, str]:
    """Every component's CLI commands (``Component.cli``): command name ->
    ``module:attribute`` of its click command."""
    from enact import components

    try:
        return components.load().cli_commands()
    except components.ComponentError as error:  # no command can be trusted to be the one asked for
        click.echo(f"enact: {error}", err=True)
        raise SystemExit(EXIT_USAGE) from None


class LazyGroup(click.Group):
    """A group whose commands are imported on first use, so that running one
    command loads neither the others nor what they import."""

    def __init__(self, *args: object, lazy: Callable[[], dict[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._find = lazy
        self._found: dict[str, str] | None = None

    @property
    def _lazy(self) -> dict[str, str]:
        if self._found is None:
            self._found = self._find()
        return self._found

    def list_commands(self, context: click.Context) -> list[str]:
        return sorted({*super().list_commands(context), *self._lazy})

    def resolve_command(
        self, context: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(context, args)
        except click.NoSuchCommand as error:
            # click suggests from the commands it holds, and this group holds
            # none until one is asked for: suggest the nearest of the whole list.
            nearest = difflib.get_close_matches(error.command_name, self.list_commands(context), n=1)
            raise click.NoSuchCommand(error.command_name, possibilities=nearest, ctx=context) from None

    def get_command(self, context: click.Context, name: str) -> click.Command | None:
        target = self._lazy.get(name)
        if target is None:
            return super().get_command(context, name)
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=LazyGroup, lazy=_commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="enact")
@click.option("--home", type=home_type(), default=None, help=f"{HOME_HELP} A command's own --home wins.")
@click.pass_context
def main(context: click.Context, home: Path | None) -> None:
    """enact: a personal software agent that runs as a daemon."""
    context.ensure_object(dict)
    context.obj["home"] = home


__all__ = ["main"]
