"""Model runtimes behind one protocol: ``invoke(RuntimeRequest) -> RuntimeResult``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from enact.cancellation import CancellationToken


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeResult:
    text: str
    native_session: str | None = None


class RuntimeFailure(Exception):
    """The runtime did not answer. Subclasses say why."""

    kind = "failed"


class RuntimeTimeout(RuntimeFailure):
    kind = "timeout"


class RuntimeCancelled(RuntimeFailure):
    kind = "cancelled"


class RuntimeSessionUnknown(RuntimeFailure):
    """The session to resume is not known to the runtime (its store was
    wiped, or, for the scripted runtime, the daemon restarted). Expected:
    the caller starts a fresh session and does not count a failure."""

    kind = "session_unknown"


class Runtime(Protocol):
    name: str

    def invoke(self, request: RuntimeRequest) -> RuntimeResult: ...
