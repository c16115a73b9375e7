"""Model runtimes behind one protocol: ``invoke(RuntimeRequest) -> RuntimeResult``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from enact.cancellation import CancellationToken
from enact.messages.sessions import HistoryMessage

SANDBOX_MODES = ("read-only", "workspace-write", "full-access")
"""``read-only`` for conversation and scans, ``workspace-write`` for task
work; ``full-access`` only when the owner sets it in config."""

PURPOSES = ("conversation", "task", "scan", "curation", "probe")
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
    """The session's earlier messages, for a runtime that keeps none (``keeps_history = False``)."""
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


class RuntimeFailure(Exception):
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


class Runtime(Protocol):
    name: str

    def invoke(self, request: RuntimeRequest) -> RuntimeResult: ...
