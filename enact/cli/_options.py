"""Options and output helpers every command shares."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from enact.cli._client import BadRequest, ConnectionLost, DaemonError, NotRunning
from enact.home import default_home

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3

HOME_HELP = "The enact home (default: $ENACT_HOME, else $XDG_STATE_HOME/enact or ~/.local/state/enact)."


def home_type() -> click.Path:
    return click.Path(file_okay=False, path_type=Path)


def home_option(command: F) -> F:
    """``--home DIR`` on every command. It has no envvar of its own:
    ``resolve_home`` falls back to ``enact --home`` and then to ``ENACT_HOME``,
    so the option given nearest the command wins."""
    return click.option("--home", type=home_type(), default=None, help=HOME_HELP)(command)


def resolve_home(home: Path | None) -> Path:
    if home is None:
        context = click.get_current_context(silent=True)
        if context is not None and isinstance(context.obj, dict):
            home = context.obj.get("home")
    return (home or default_home()).expanduser().absolute()


def print_json(value: object) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def fail(text: str, *, as_json: bool, code: int = EXIT_FAILED, prefix: str = "enact: ",
         **fields: object) -> NoReturn:
    """End the command with one line: ``{"error": text, **fields}`` on
    standard output with ``--json``, else the text on standard error."""
    if as_json:
        click.echo(orjson.dumps({**fields, "error": text}).decode())
    else:
        click.echo(f"{prefix}{text}", err=True)
    sys.exit(code)


def fail_if_rejected(reply: object, *, as_json: bool) -> None:
    """End the command the way every refusal ends it: ``Rejected``'s reason
    in one line, ``status: rejected`` with ``--json``, exit 2."""
    from enact.messages.common import Rejected

    if isinstance(reply, Rejected):
        fail(reply.reason, as_json=as_json, status="rejected", code=EXIT_USAGE)


def needs_daemon(command: F) -> F:
    """Turn the client's errors into one line (JSON with ``--json``) and the
    documented exit codes."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return command(*args, **kwargs)
        except BadRequest as error:
            fail(str(error), as_json=as_json, code=EXIT_USAGE, status="bad_input")
        except ConnectionLost as error:
            fail(str(error), as_json=as_json, status="connection_lost")
        except NotRunning as error:
            fail(str(error), as_json=as_json, code=EXIT_NOT_RUNNING, prefix="", status="not_running")
        except DaemonError as error:
            fail(str(error), as_json=as_json)

    return wrapper  # type: ignore[return-value]
