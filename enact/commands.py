"""Registered commands: one registry serves chat commands (``/status``), model
actions (``{"action": "status"}``) and ``enact call commands.Run``.

A command declares the authority it needs. Authority is judged from the
origin of the call, which the host stamps; a caller cannot choose it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from enact.actors._asks import Asker
from enact.cancellation import CancellationToken
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request
from enact.messages.commands import CommandInfo, CommandOutcome, Receipt
from enact.messages.common import NotFound, Origin, Refused, is_human
from enact.ownership import not_the_owners
from enact.spoken import Audience

if TYPE_CHECKING:
    from enact.fence import Fence

log = logging.getLogger(__name__)

R = TypeVar("R")

MAX_RECEIPT = 4000
"""Receipt text is clipped to this many characters (head and tail kept)."""

TYPED = "text"
"""The argument a chat command's words are: ``/review.land 5`` is ``review.land``
with ``{"text": "5"}`` (``enact.chat.conversation.chat_command``)."""


class Authority(enum.Enum):
    PUBLIC = "public"  # shows nothing of the owner's (the command list, whether the daemon is up): any accepted chat
    READ = "read"  # looks, changes nothing, shows the owner's (work, memory, schedules): only the owner's conversation
    EFFECT = "effect"  # changes something: only in the owner's conversation (the CLI, or a locked chat)
    HUMAN = "human"  # approve, land, merge, remove: never a model action; only in the owner's conversation

    @property
    def looks(self) -> bool:
        """It changes nothing: not journaled, and a fenced daemon may still run it."""
        return self in (Authority.PUBLIC, Authority.READ)


@dataclass(frozen=True, slots=True)
class Param:
    type: type[Any] | tuple[type[Any], ...]
    required: bool = True
    doc: str = ""
    """What the argument is, as a chat user is told it is missing: "a review id"."""
    type_name: str = ""
    usage: str = ""
    """How the typed argument reads in a chat command's usage ("ID"); "" for TEXT."""

    @property
    def kind(self) -> str:
        if self.type_name:
            return self.type_name
        return self.type.__name__ if isinstance(self.type, type) else " or ".join(t.__name__ for t in self.type)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandCall:
    """One invocation: who asked (``origin``), in answer to which event's
    origin, and whether that conversation is the owner's."""

    name: str
    args: dict[str, Any]
    origin: Origin
    event_origin: Origin
    owners: bool
    """The call answers the owner's conversation: the local CLI, or a chat
    the conversation lock names (``enact.ownership``)."""
    cancel: CancellationToken
    conversation: str = ""
    request_id: str = ""
    """The request (chat event) it runs for; "" when there is none."""
    receipts: tuple[str, ...] = ()
    """For a model's action: the receipts of the turn's earlier actions, what
    the model read before asking (a command that keeps what it is given holds
    a repetition of them for the owner, as ``remember`` does)."""

    @property
    def audience(self) -> Audience:
        """Who reads the receipt: a chat message's command speaks chat, a
        model's action JSON, ``enact call commands.Run`` the CLI."""
        return Audience.of(self.origin, in_conversation=bool(self.conversation))


Handler = Callable[[CommandCall, "CommandContext"], str]
"""Returns the receipt text; raises CommandFailed for an expected failure."""


class CommandFailed(EnactError):
    """The command ran and failed; the message is the receipt, ``outcome``
    how it failed (an actor's refusal is ``refused``, see ``answered``)."""

    def __init__(self, text: str, outcome: CommandOutcome = CommandOutcome.FAILED) -> None:
        super().__init__(text)
        self.outcome = outcome


def answered(reply: R | Refused | NotFound, about: str = "") -> R:
    """``reply``, unless it is an actor's refusal or not-found reply: then
    the end of the command, the way every command ends on one: its line as
    the receipt (after ``about``, what did not happen, when given), with the
    outcome ``refused`` or ``not_found``."""
    if isinstance(reply, Refused):
        raise CommandFailed(f"{about}: {reply.reason}" if about else reply.reason, CommandOutcome.REFUSED)
    if isinstance(reply, NotFound):
        raise CommandFailed(reply.line, CommandOutcome.NOT_FOUND)
    return reply


def _no_actors(actor: str, message: Request[R], /) -> R:
    raise RuntimeError(f"this command context cannot ask actor {actor!r}")


class Converse(Protocol):
    """A call on a conversation's own session (``enact.chat.session_calls``);
    ``owners``: the conversation is the owner's. Returns the session's answer."""

    def __call__(self, session_key: str, prompt: str, *, owner_message: str, owners: bool) -> str: ...


@dataclass(frozen=True, slots=True)
class CommandContext:
    """What a command handler may use of the daemon."""

    fence: Fence
    status: Callable[[], str]
    ask: Asker = _no_actors
    """Ask an actor by name (``Supervisor.ask`` with the control deadline)."""
    converse: Converse | None = None
    """A call on a conversation's own session, as its conversation makes them."""
    agentic: bool = True
    """Whether the selected runtime can work in a repository."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: str
    summary: str
    handler: Handler
    authority: Authority = Authority.READ
    shows: str = ""
    """What a ``read`` command shows, for the refusal a conversation that is
    not the owner's gets ("memory"); "" for "what NAME shows"."""
    params: Mapping[str, Param] = field(default_factory=dict)
    free: bool = False  # any JSON object of arguments is accepted; ``params`` is then empty

    def info(self) -> CommandInfo:
        return CommandInfo(
            name=self.name,
            summary=self.summary,
            authority=self.authority.value,
            params=tuple(self.params),
            free_args=self.free,
        )


class ProgramsSource(Protocol):
    """Where the owner's commands come from (``enact.programs.ProgramSource``)."""

    path: Path

    def stamp(self) -> tuple[int, int] | None: ...

    def load(self) -> tuple[tuple[int, int] | None, list[Command]]: ...


class CommandRegistry:
    """Built-in commands plus the owner's programs. The programs are read
    again when their file changes (checked on use); a broken edit keeps the
    previous ones and logs why, once per edit."""

    def __init__(self) -> None:
        self._builtin: dict[str, Command] = {}
        self._commands: dict[str, Command] = {}
        self._context: CommandContext | None = None
        self._source: ProgramsSource | None = None
        self._stamp: tuple[int, int] | None = None
        self._reload_lock = threading.Lock()

    def register(self, command: Command) -> None:
        if command.name in self._commands:
            raise ValueError(f"command {command.name!r} is registered twice")
        self._commands[command.name] = command
        if self._source is None:
            self._builtin[command.name] = command

    def watch(self, source: ProgramsSource) -> None:
        """Load the programs now (raises on a bad file) and again on change."""
        stamp, programs = source.load()
        self._commands = self._merged(programs, source.path)
        self._source, self._stamp = source, stamp

    def _merged(self, programs: list[Command], path: Path) -> dict[str, Command]:
        merged = dict(self._builtin)
        for command in programs:
            if command.name in merged:
                raise ValueError(f"{path}: command {command.name!r} is a built-in command")
            merged[command.name] = command
        return merged

    def _refresh(self) -> dict[str, Command]:
        source = self._source
        if source is None or source.stamp() == self._stamp:
            return self._commands
        with self._reload_lock:
            stamp = source.stamp()
            if stamp == self._stamp:
                return self._commands
            try:
                _, programs = source.load()
                commands = self._merged(programs, source.path)
            except (ValueError, OSError) as error:
                log.error("keeping the previous commands: %s", error)
            else:
                self._commands = commands
                log.info("commands reloaded from %s: %d programs", source.path, len(programs))
            self._stamp = stamp
        return self._commands

    def bind(self, context: CommandContext) -> None:
        self._context = context

    def get(self, name: str) -> Command | None:
        return self._refresh().get(name)

    def names(self) -> frozenset[str]:
        return frozenset(self._refresh())

    def catalog(self) -> list[CommandInfo]:
        commands = self._refresh()
        return [commands[name].info() for name in sorted(commands)]

    def refusal(self, call: CommandCall) -> Receipt | None:
        """Why this call would be refused without running, or None."""
        commands = self._refresh()
        command = commands.get(call.name)
        if command is None:
            known = ", ".join(sorted(commands))
            text = f"unknown command {call.name!r}; known: {known}"
            return unsuccessful(call.name, CommandOutcome.UNKNOWN_COMMAND, text)
        problem = _check_args(command, call.args, call.audience)
        if problem:
            return unsuccessful(call.name, CommandOutcome.BAD_ARGS, problem)
        problem = _check_authority(command, call)
        if problem:
            return unsuccessful(call.name, CommandOutcome.REFUSED, problem)
        if self._context is None:
            raise RuntimeError("the command registry is used before the daemon bound it")
        if not command.authority.looks and not self._context.fence.is_current():
            return unsuccessful(call.name, CommandOutcome.REFUSED, "refused: this daemon was taken over (fenced)")
        return None

    def run(self, call: CommandCall) -> Receipt:
        """Check and run one call. Refusals are receipts, never exceptions."""
        refused = self.refusal(call)
        if refused is not None:
            return refused
        command, context = self._commands.get(call.name), self._context
        if command is None or context is None:  # removed by a reload just now
            return unsuccessful(call.name, CommandOutcome.UNKNOWN_COMMAND, f"unknown command {call.name!r}")
        try:
            text = command.handler(call, context)
        except CommandFailed as failure:
            return unsuccessful(call.name, failure.outcome, clip(str(failure)))
        except Exception as error:
            log.exception("command %s failed", call.name)
            return unsuccessful(call.name, CommandOutcome.FAILED, clip(f"failed: {type(error).__name__}: {error}"))
        return Receipt(command=call.name, ok=True, text=clip(text), outcome=CommandOutcome.OK)


def unsuccessful(command: str, outcome: CommandOutcome, text: str) -> Receipt:
    """A receipt of a run that did not succeed, and why, as data."""
    return Receipt(command=command, ok=False, text=text, outcome=outcome)


def chat_usage(command: Command) -> str:
    """How a command is typed in chat: ``/review.land ID``, ``/memory [TAG]``."""
    typed = command.params.get(TYPED)
    if typed is None:
        return f"/{command.name}"
    words = typed.usage or "TEXT"
    return f"/{command.name} {words if typed.required else f'[{words}]'}"


def _check_args(command: Command, args: dict[str, Any], audience: Audience) -> str:
    if command.free:
        return ""
    if audience is Audience.CHAT:
        problem = _check_typed_args(command, args)
        if problem:
            return problem
    # A model's action and ``enact call`` give arguments as JSON: named by their keys.
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
            return f"bad arguments for {command.name}: {name!r} must be {param.kind}"
    return ""


def _check_typed_args(command: Command, args: dict[str, Any]) -> str:
    """A chat user typed the command's words: what is wrong, said as the command's usage."""
    typed = command.params.get(TYPED)
    named = [name for name in command.params if name != TYPED]
    if typed is None and args:
        if not named:
            return f"/{command.name} takes no arguments"
        return (f"/{command.name} takes no arguments in chat; a model's action or `enact call commands.Run` "
                f"gives its {', '.join(named)}")
    needed = [name for name in named if command.params[name].required]
    if needed:
        return (f"/{command.name} cannot be run from chat: it needs {', '.join(needed)}, which a model's action "
                "or `enact call commands.Run` gives")
    if typed is not None and typed.required and TYPED not in args:
        return f"/{command.name} needs {typed.doc or 'some text'} — usage: {chat_usage(command)}"
    return ""


def _check_authority(command: Command, call: CommandCall) -> str:
    if command.authority is Authority.HUMAN and not is_human(call.origin):
        return f"refused: {command.name} needs a human; a model action cannot run it"
    if command.authority is Authority.HUMAN and not call.owners:
        # A person's word, and an effect too: from chat only where the lock
        # says the person is the owner.
        return (f"refused: {command.name} needs the conversation lock (chat.allowed_conversations) when asked "
                "from chat, so that only the owner can; or use the CLI")
    if command.authority is Authority.EFFECT and not call.owners:
        return (
            f"refused: {command.name} changes things, and with no conversation lock configured "
            "(chat.allowed_conversations) only the owner's CLI may cause effects"
        )
    if command.authority is Authority.READ and not call.owners:
        # What it shows is the owner's (tasks, reviews, repositories, memory,
        # evolution, schedules): a stranger's chat, or a model's action in
        # one, is told so and how the owner makes a chat theirs; nothing more.
        return not_the_owners(command.shows or f"what {command.name} shows", call.conversation)
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
            command = registry.get(info.name)
            if call.audience is Audience.CHAT and command is not None:
                # A person reads how to type it; a model reads the argument keys it sends.
                usage = chat_usage(command)
            else:
                params = f" ({', '.join(info.params)})" if info.params else " (any arguments)" if info.free_args else ""
                usage = f"/{info.name}{params}"
            lines.append(f"{usage} — {info.summary} [{info.authority}]")
        return "\n".join(lines)

    def status_text(_: CommandCall, context: CommandContext) -> str:
        return context.status()

    # Both are public: the command list is the software's, and the status line
    # says only that the daemon is up (version, pid, uptime, actors running),
    # nothing of the owner's tasks, reviews, repositories, memory or schedules.
    return [
        Command(name="help", summary="list the commands", handler=help_text, authority=Authority.PUBLIC),
        Command(name="status", summary="the daemon's status", handler=status_text, authority=Authority.PUBLIC),
    ]


__all__ = [
    "TYPED",
    "Authority",
    "Command",
    "CommandCall",
    "CommandContext",
    "CommandFailed",
    "CommandRegistry",
    "Param",
    "ProgramsSource",
    "answered",
    "builtin_commands",
    "chat_usage",
    "clip",
]
