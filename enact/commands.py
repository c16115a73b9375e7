"""Registered commands: one registry serves chat commands (``/status``), model
actions (``{"action": "status"}``) and ``enact call commands.Run``.

A command declares the authority it needs. Authority is judged from the
origin of the call, which the host stamps; a caller cannot choose it.
"""

from __future__ import annotations

import enum
import logging
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from enact.cancellation import CancellationToken
from enact.messages.commands import CommandInfo, Receipt
from enact.messages.common import HUMAN_CLI, Origin, is_human
from enact.tables import table_list

if TYPE_CHECKING:
    from enact.actors.epoch import Fence
    from enact.actors.supervisor import Supervisor

log = logging.getLogger(__name__)

MAX_RECEIPT = 4000
"""Receipt text is clipped to this many characters (head and tail kept)."""


class Authority(enum.Enum):
    READ = "read"  # looks, changes nothing: anyone in an accepted conversation
    EFFECT = "effect"  # changes something: needs the conversation lock or the owner's CLI
    HUMAN = "human"  # approve, land, merge, remove: never a model action


@dataclass(frozen=True, slots=True)
class Param:
    type: type[Any]
    required: bool = True
    doc: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandCall:
    """One invocation: who asked (``origin``), in answer to which event's
    origin, and whether the conversation lock is configured."""

    name: str
    args: dict[str, Any]
    origin: Origin
    event_origin: Origin
    locked: bool
    cancel: CancellationToken
    conversation: str = ""


Handler = Callable[[CommandCall, "CommandContext"], str]
"""Returns the receipt text; raises CommandFailed for an expected failure."""


class CommandFailed(Exception):
    """The command ran and failed; the message is the receipt."""


@dataclass(frozen=True, slots=True)
class CommandContext:
    supervisor: Supervisor
    fence: Fence
    status: Callable[[], str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: str
    summary: str
    handler: Handler
    authority: Authority = Authority.READ
    params: Mapping[str, Param] = field(default_factory=dict)

    def info(self) -> CommandInfo:
        return CommandInfo(
            name=self.name, summary=self.summary, authority=self.authority.value, params=tuple(self.params)
        )


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._context: CommandContext | None = None

    def register(self, command: Command) -> None:
        if command.name in self._commands:
            raise ValueError(f"command {command.name!r} is registered twice")
        self._commands[command.name] = command

    def bind(self, context: CommandContext) -> None:
        self._context = context

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def catalog(self) -> list[CommandInfo]:
        return [self._commands[name].info() for name in sorted(self._commands)]

    def run(self, call: CommandCall) -> Receipt:
        """Check and run one call. Refusals are receipts, never exceptions."""
        command = self._commands.get(call.name)
        if command is None:
            known = ", ".join(sorted(self._commands))
            return Receipt(command=call.name, ok=False, text=f"unknown command {call.name!r}; known: {known}")
        problem = _check_args(command, call.args) or _check_authority(command, call)
        if problem:
            return Receipt(command=call.name, ok=False, text=problem)
        assert self._context is not None, "the registry is used before the daemon bound it"
        if command.authority is not Authority.READ and not self._context.fence.is_current():
            return Receipt(command=call.name, ok=False, text="refused: this daemon was taken over (fenced)")
        try:
            text = command.handler(call, self._context)
        except CommandFailed as failure:
            return Receipt(command=call.name, ok=False, text=clip(str(failure)))
        except Exception as error:
            log.exception("command %s failed", call.name)
            return Receipt(command=call.name, ok=False, text=clip(f"failed: {type(error).__name__}: {error}"))
        return Receipt(command=call.name, ok=True, text=clip(text))


def _check_args(command: Command, args: dict[str, Any]) -> str:
    unknown = sorted(set(args) - set(command.params))
    if unknown:
        return f"bad arguments for {command.name}: unknown argument {unknown[0]!r}"
    for name, param in command.params.items():
        if name not in args:
            if param.required:
                return f"bad arguments for {command.name}: missing argument {name!r}"
            continue
        value = args[name]
        wrong_bool = isinstance(value, bool) and param.type is not bool
        if wrong_bool or not isinstance(value, param.type):
            return f"bad arguments for {command.name}: {name!r} must be {param.type.__name__}"
    return ""


def _check_authority(command: Command, call: CommandCall) -> str:
    if command.authority is Authority.HUMAN and not is_human(call.origin):
        return f"refused: {command.name} needs a human; a model action cannot run it"
    if command.authority is Authority.EFFECT and not (call.locked or call.event_origin == HUMAN_CLI):
        return (
            f"refused: {command.name} changes things, and with no conversation lock configured "
            "(chat.allowed_conversations) only the owner's CLI may cause effects"
        )
    return ""


def clip(text: str, limit: int = MAX_RECEIPT) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 20) // 2
    return f"{text[:half]}\n[… clipped …]\n{text[-half:]}"


# -- built-in commands ------------------------------------------------------


def builtin_commands(registry: CommandRegistry) -> list[Command]:
    def help_text(call: CommandCall, _: CommandContext) -> str:
        lines = ["Commands (/name in chat, or an action from the model):"]
        for info in registry.catalog():
            params = f" ({', '.join(info.params)})" if info.params else ""
            lines.append(f"/{info.name}{params} — {info.summary} [{info.authority}]")
        return "\n".join(lines)

    def status_text(_: CommandCall, context: CommandContext) -> str:
        return context.status()

    return [
        Command(name="help", summary="list the commands", handler=help_text),
        Command(name="status", summary="the daemon's status", handler=status_text),
    ]


# -- commands the owner registers in <home>/commands.toml ------------------


class CommandsFileError(ValueError):
    pass


def load_program_commands(path: Path) -> list[Command]:
    """``[[command]]`` tables: ``name``, ``run`` (argv list), ``summary``,
    ``authority`` (default ``effect``), ``timeout_s`` (default 60). The
    arguments reach the program as JSON on its standard input."""
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandsFileError(f"{path}: {error}") from None
    commands = []
    keys = frozenset({"name", "run", "summary", "authority", "timeout_s"})
    for where, table in table_list(text, source=str(path), name="command", keys=keys, error=CommandsFileError):
        name, run = table.get("name"), table.get("run")
        if not isinstance(name, str) or not name.replace(".", "").replace("_", "").replace("-", "").isalnum():
            raise CommandsFileError(f"{where}: 'name' must be a word (letters, digits, . _ -)")
        if not isinstance(run, list) or not run or not all(isinstance(part, str) for part in run):
            raise CommandsFileError(f"{where}: 'run' must be a non-empty list of strings")
        try:
            authority = Authority(table.get("authority", "effect"))
        except ValueError:
            raise CommandsFileError(f"{where}: 'authority' must be read, effect or human") from None
        timeout = table.get("timeout_s", 60)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise CommandsFileError(f"{where}: 'timeout_s' must be a positive number")
        commands.append(
            Command(
                name=name,
                summary=str(table.get("summary", f"runs {run[0]}")),
                authority=authority,
                params={},
                handler=_program_handler(list(run), float(timeout)),
            )
        )
    return commands


def _program_handler(argv: list[str], timeout_s: float) -> Handler:
    def run(call: CommandCall, _: CommandContext) -> str:
        return run_program(argv, orjson.dumps(call.args), timeout_s=timeout_s, cancel=call.cancel)

    return run


def run_program(argv: list[str], stdin: bytes, *, timeout_s: float, cancel: CancellationToken) -> str:
    """Run a program, killing it on timeout or cancellation."""
    cancel.raise_if_cancelled()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    killer = threading.Event()

    def kill(_: str) -> None:
        killer.set()
        process.kill()

    cancel.on_cancel(kill)
    try:
        output, _ = process.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise CommandFailed(f"{argv[0]} timed out after {timeout_s:g} s") from None
    if killer.is_set():
        raise CommandFailed(f"{argv[0]} was cancelled: {cancel.reason}")
    text = output.decode(errors="replace").strip()
    if process.returncode != 0:
        raise CommandFailed(f"{argv[0]} exited with status {process.returncode}: {text}")
    return text or f"{argv[0]} finished"


__all__ = [
    "Authority",
    "Command",
    "CommandCall",
    "CommandContext",
    "CommandFailed",
    "CommandRegistry",
    "Param",
    "builtin_commands",
    "clip",
    "load_program_commands",
]
