"""Options and output helpers every command shares."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from enact.cli._client import DaemonError, NotRunning
from enact.home import default_home

F = TypeVar("F", bound=Callable[..., Any])

EXIT_NOT_RUNNING = 3


def home_option(command: F) -> F:
    """``--home DIR`` (or ``ENACT_HOME``) on every command."""
    return click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="ENACT_HOME",
        default=None,
        help="The enact home (default: $XDG_STATE_HOME/enact or ~/.local/state/enact).",
    )(command)


def resolve_home(home: Path | None) -> Path:
    return (home or default_home()).expanduser().absolute()


def needs_daemon(command: F) -> F:
    """Turn the client's errors into one line and the documented exit codes."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except NotRunning as error:
            click.echo(str(error), err=True)
            sys.exit(EXIT_NOT_RUNNING)
        except DaemonError as error:
            click.echo(f"enact: {error}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def print_json(value: object) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


