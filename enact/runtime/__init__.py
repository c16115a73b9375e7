"""Model runtimes behind one protocol: ``invoke(RuntimeRequest) -> RuntimeResult``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from enact.cancellation import CancellationToken
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:  # every CLI command imports this package (the runtimes' components): no protocol for a type
    from enact.messages.sessions import HistoryMessage

SANDBOX_MODES = ("read-only", "workspace-write", "full-access")
"""``read-only`` for conversation and scans, ``workspace-write`` for task
work; ``full-access`` only when the owner sets it in config."""

PURPOSES = ("conversation", "task", "scan", "curation", "brainstorm", "lineage", "skill", "probe")
"""Why a call is made; labels the token metrics, so background spending shows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens a call spent, as the runtime reported them (0 when it did not)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeRequest:
    """One call. ``session_key`` empty means isolated: no session is read or
    written. ``native_session`` set means resume that session.

    ``owner_message`` and ``receipt`` repeat, as data, what ``prompt`` says in
    words; only the scripted runtime reads them, so that its rules can match
    the owner's words without parsing the host's prompt."""

    session_key: str
    prompt: str
    native_session: str | None = None
    owner_message: str = ""
    receipt: str | None = None
    sandbox: str = "read-only"
    cwd: Path | None = None
    timeout_s: float = 600.0
    cancel: CancellationToken = field(default_factory=CancellationToken)
    images: tuple[Path, ...] = ()
    purpose: str = "conversation"
    history: tuple[HistoryMessage, ...] = ()
    """The session's earlier messages, for a runtime that keeps none (``Capabilities.keeps_history`` False)."""
    confine: tuple[str, ...] = ()
    """An argv prefix (bubblewrap's, from ``enact.tasks.confine``) that every
    subprocess the runtime starts for this call runs under; () unconfined."""
    private_state: tuple[tuple[Path, Path], ...] = ()
    """Confined: (a state directory of the runtime, the task's private one
    that takes its place), so that what the call wrote there is found."""
    env: Mapping[str, str] | None = None
    """The environment of the commands the call runs (``enact.environment``:
    an allow-list); a CLI gets it plus what it needs to reach its model.
    None: the runtime's own environment."""
    spends_over_budget: bool = False
    """The call is made whatever the day's budget says (``enact.budget``):
    the owner talking from the local CLI. It is counted all the same."""
    writable: tuple[Path, ...] = ()
    """With ``workspace-write``: what the call's commands may also write, where
    a runtime's own sandbox would keep it read-only (a task's git directory
    of its own, ``enact.tasks.task_git``, which Codex's keeps read-only as a
    repository's ``.git``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRun:
    """A command the runtime's model ran (a shell tool call), as its CLI reported it."""

    command: str
    exit_code: int | None
    """None: it failed without an exit status (refused, or the tool itself failed)."""
    output: str = ""
    """The tail of what it printed, for a failed one."""

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    def describe(self) -> str:
        """One line for the task log and a failure's reason."""
        status = "no exit status" if self.exit_code is None else f"exit {self.exit_code}"
        command, output = " ".join(self.command.split()), " ".join(self.output.split())
        return f"`{command}` ({status})" + (f": {output}" if output and self.failed else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeResult:
    text: str
    native_session: str | None = None
    usage: Usage = Usage()
    duration_s: float = 0.0
    progress: tuple[str, ...] = ()
    """Items that are not the answer nor a command (tool uses, the CLI's warnings), for the task log."""
    commands: tuple[CommandRun, ...] = ()
    """The commands the model ran during the call, in order, for the task log
    and for the worker (a task whose commands all failed did nothing)."""
    skills_used: tuple[str, ...] = ()
    """The skills the model took up through the runtime's own skill tool
    (Claude Code's ``Skill``), in order: recorded as that turn's or task's use."""


class RuntimeFailure(EnactError):
    """The runtime did not answer. Subclasses say why; ``usage`` is what the
    failed call spent all the same."""

    kind = "failed"

    def __init__(self, message: str = "", *, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage if usage is not None else Usage()


class RuntimeTimeout(RuntimeFailure):
    kind = "timeout"


class RuntimeCancelled(RuntimeFailure):
    kind = "cancelled"


class RuntimeSessionUnknown(RuntimeFailure):
    """The session to resume is not known to the runtime (its store was
    wiped, or, for the scripted runtime, the daemon restarted). Expected:
    the caller starts a fresh session and does not count a failure."""

    kind = "session_unknown"


class RuntimeUnavailable(RuntimeFailure):
    """The binary or the endpoint is not there."""

    kind = "unavailable"


class RuntimeAuthFailed(RuntimeFailure):
    """Not logged in, or the key was refused."""

    kind = "auth"


class RuntimeRateLimited(RuntimeFailure):
    kind = "rate-limited"

    def __init__(self, message: str = "", *, usage: Usage | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message, usage=usage)
        self.retry_after_s = retry_after_s


class RuntimeOverBudget(RuntimeFailure):
    """Not called: the day's token budget of the call's purpose, or the
    total, is spent (``enact.budget``). Nothing was sent to the model."""

    kind = "over_budget"


class RuntimeMalformedOutput(RuntimeFailure):
    """The runtime answered something that is not what it promises to print."""

    kind = "malformed-output"


def checked_sandbox(sandbox: str) -> str:
    """``sandbox`` if it names one of the modes; the one check of a mode's
    name, for the wrapper every call goes through and for each adapter that
    maps the mode to its CLI's words. Raises RuntimeFailure."""
    if sandbox not in SANDBOX_MODES:
        raise RuntimeFailure(f"unknown sandbox mode {sandbox!r}; expected one of {', '.join(SANDBOX_MODES)}")
    return sandbox


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a runtime can do and what it keeps, declared by every runtime in
    one value (``Runtime.capabilities``) and passed through unchanged by the
    wrappers around it (``enact.runtime.metered``, ``enact.tasks.confined_calls``)."""

    agentic: bool
    """It edits files and runs commands: task work can be given to it."""
    keeps_history: bool
    """It keeps a session's history itself; False (a stateless endpoint):
    the host stores it and sends it with each call (``RuntimeRequest.history``)."""
    confines_subprocesses: bool
    """A confined call (``RuntimeRequest.confine``) starts every subprocess
    under the prefix; False: a task on it is not confined (its doctor is)."""
    history_chars: int = 0
    """With ``keeps_history`` False: the budget the host trims a session's history to."""
    state_dirs: tuple[Path, ...] = ()
    """What its CLI writes besides the worktree (sessions, logs), replaced by a
    private one when a task is confined; none: its calls outside a task are
    not confined either (``enact.tasks.confined_calls.confines_calls``)."""
    own_state: tuple[str, ...] = ()
    """Patterns of the names in ``state_dirs`` that a call writes for itself
    (``enact.tasks.confine.StateDir``)."""
    program_dirs: tuple[Path, ...] = ()
    """Where its CLI runs from, kept visible to a confined call."""
    conversation_dir: Path | None = None
    """Where a call with no working directory of its own runs; None:
    ``$ENACT_HOME/conversation``."""
    native_skills: str = ""
    """Where, under a call's working directory, its CLI finds a project's
    skills by itself ("": it reads none natively); enact places the
    installed skills there."""


class Runtime(Protocol):
    name: str

    @property
    def capabilities(self) -> Capabilities:
        """What it can do (read when needed: state and program directories
        may follow its environment and its executable)."""
        ...

    @property
    def waits_for(self) -> str:
        """What a call waits for, as ``runtime check --probe`` names it."""
        ...

    def invoke(self, request: RuntimeRequest) -> RuntimeResult: ...


class RuntimeWrapper:
    """A runtime around another (metering, confinement of calls): it is the
    wrapped one in name, capabilities and what it waits for; a subclass
    changes only ``invoke``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.name = runtime.name

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped runtime's, read at each ask (they may follow its environment)."""
        return self.runtime.capabilities

    @property
    def waits_for(self) -> str:
        return self.runtime.waits_for

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        return self.runtime.invoke(request)
