"""Options and output helpers every command shares."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import field
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from enact.cli._client import BadRequest, ConnectionLost, DaemonError, NotRunning
from enact.exit_codes import ExitCode
from enact.frozen_dataclass import dataclass
from enact.home import default_home

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = ExitCode.FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_NOT_RUNNING = ExitCode.NOT_RUNNING
EXIT_TIMED_OUT = ExitCode.TIMED_OUT

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


def fail(text: str, *, as_json: bool, code: int = EXIT_FAILED, status: str = "", prefix: str = "enact: ",
         **fields: object) -> NoReturn:
    """End the command with one line (``end_command``), exit ``code``."""
    end_command(text, as_json=as_json, exit_code=code, status=status, prefix=prefix, fields=fields)


def end_command(line: str, *, as_json: bool, exit_code: int, status: str = "", prefix: str = "enact: ",
                fields: Mapping[str, object] | None = None) -> NoReturn:
    """End the command with one line: ``{"status": status, **fields,
    "error": line}`` on standard output with ``--json``, else the line on
    standard error. ``status`` is one of ``STATUSES``; left out, the exit
    code says it (2 ``bad_input``, else ``failed``)."""
    if as_json:
        said = status or ("bad_input" if exit_code == EXIT_USAGE else "failed")
        click.echo(orjson.dumps({"status": said, **(fields or {}), "error": line}).decode())
    else:
        click.echo(f"{prefix}{line}", err=True)
    sys.exit(exit_code)


def refuse_together(first: str, second: str, *, as_json: bool) -> None:
    """End with a usage error (exit 2, ``bad_input``) when options ``first``
    and ``second`` (their parameter names) were both given: each says
    something the other contradicts. An option left at its default was not given."""
    from click.core import ParameterSource

    context = click.get_current_context()
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
    if all(context.get_parameter_source(name) in given for name in (first, second)):
        said = [f"--{name.replace('_', '-')}" for name in (first, second)]
        fail(f"{said[0]} and {said[1]} cannot be used together: give one of them", as_json=as_json,
             code=EXIT_USAGE)


@dataclass(frozen=True, slots=True)
class JsonStatus:
    """What a ``--json`` status word means, as the CLI reference says it."""

    exits: tuple[ExitCode, ...]
    """The exit codes it comes with, the usual one first."""
    when: str
    beside: str = ""
    """The fields printed beside ``error``."""


STATUSES: Mapping[str, JsonStatus] = {
    "refused": JsonStatus((EXIT_USAGE, EXIT_FAILED),
                          "the daemon understood and declined; nothing changed (exit 1 for `busy`: one is running, "
                          "try again later)", "`code`: a word to branch on"),
    "not_found": JsonStatus((EXIT_USAGE,), "what the command names does not exist",
                            '`kind` and `id` (`{"kind": "task", "id": "7", "error": "no task 7"}`)'),
    "bad_input": JsonStatus((EXIT_USAGE,), "refused before it reached the daemon"),
    "failed": JsonStatus((EXIT_FAILED,), "a daemon error, or a failure the command names"),
    "connection_lost": JsonStatus((EXIT_FAILED,), "the daemon closed the connection before it answered"),
    "not_running": JsonStatus((EXIT_NOT_RUNNING,), "no daemon runs on the home"),
    "timed_out": JsonStatus((EXIT_TIMED_OUT,), "a wait's `--timeout` passed before what it waited for ended "
                            "(`task watch`; the task goes on)", "`id`, `state`"),
}
"""The ``--json`` statuses of a command that did not do what it was asked,
the same in every command (the CLI reference is generated from this);
``enact send`` adds its event's own (``ignored``, ``interrupted``,
``in_progress``, ...)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """How a command ends when it did not get what it asked: its ``--json``
    status, its exit code, its line, and the fields printed beside them."""

    status: str
    code: int
    line: str
    fields: dict[str, str] = field(default_factory=dict)
    prefix: str = "enact: "


def failure_of(outcome: object, about: str = "") -> Failure | None:
    """The CLI's one mapping of a failure, whatever the command: an actor's
    ``Refused`` or ``NotFound`` reply, or the client's error, to its status,
    exit code and line (``about`` before a refusal's reason: what did not
    happen); None for any other reply. A refusal is exit 2, nothing changed,
    except ``busy``, exit 1: the same request may work later."""
    from enact.messages.common import NotFound, RefusalCode, Refused

    if isinstance(outcome, Refused):
        line = f"{about}: {outcome.reason}" if about else outcome.reason
        code = EXIT_FAILED if outcome.code == RefusalCode.BUSY else EXIT_USAGE
        return Failure("refused", code, line, {"code": str(outcome.code)})
    if isinstance(outcome, NotFound):
        return Failure("not_found", EXIT_USAGE, outcome.line, {"kind": outcome.kind, "id": outcome.id})
    if isinstance(outcome, BadRequest):
        return Failure("bad_input", EXIT_USAGE, str(outcome))
    if isinstance(outcome, ConnectionLost):
        return Failure("connection_lost", EXIT_FAILED, str(outcome))
    if isinstance(outcome, NotRunning):
        return Failure("not_running", EXIT_NOT_RUNNING, str(outcome), prefix="")
    if isinstance(outcome, DaemonError):
        return Failure("failed", EXIT_FAILED, str(outcome))
    return None


def end_on_failure(outcome: object, *, as_json: bool, about: str = "") -> None:
    """End the command if ``outcome`` is a failure (``failure_of``), the
    way every command ends on one; return otherwise."""
    failure = failure_of(outcome, about)
    if failure is not None:
        end_command(failure.line, as_json=as_json, exit_code=failure.code, status=failure.status,
                    prefix=failure.prefix, fields=failure.fields)


def needs_daemon(command: F) -> F:
    """Turn the client's errors into one line (JSON with ``--json``) and the
    documented exit codes."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (BadRequest, NotRunning, DaemonError) as error:
            end_on_failure(error, as_json=bool(kwargs.get("as_json")))
            raise  # not reached: each of them is a failure

    return wrapper  # type: ignore[return-value]
