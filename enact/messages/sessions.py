"""The sessions protocol: session key to the runtime's native session."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import Done, NotFound

MAX_NOTES = 8
"""Pending notes kept per conversation; a further one drops the oldest."""
MAX_NOTE = 1_000


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryMessage:
    """One message of a session's history, as chat completions take it."""

    role: str  # "user" or "assistant"
    content: str


@request("sessions.Lookup", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup(Request["Session | NotFound"]):
    """The mapping of ``key``, if one was written under ``prompt_version``."""

    key: str = field(metadata=limit(512))
    prompt_version: int


@reply("sessions.Session")
@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    key: str
    native_id: str
    turns: int
    created_at: float
    updated_at: float
    prompt_version: int


@request("sessions.Record", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Record(Request["Done"]):
    """A turn ran in ``native_id``: store the mapping, count the turn."""

    key: str = field(metadata=limit(512))
    native_id: str = field(metadata=limit(512))
    prompt_version: int
    exchange: tuple[HistoryMessage, ...] = ()
    """For a runtime that keeps no history (``openai``): the turn's messages,
    appended to the session's history, which is then trimmed to ``history_chars``."""
    history_chars: int = 0
    context_at: float = 0.0
    """When the call's memory context was taken (0: it had none). A fact
    forgotten after that may be in the call: the Sessions actor then redacts
    the exchange and does not keep a native session the call started."""
    notes_given: tuple[str, ...] = field(default=(), metadata=limit(MAX_NOTES))
    """The ids of the pending notes (``Notes``) the call carried: they are
    taken in the commit that records the turn, and never given again."""


# -- notes: what the conversation's next call is told first -------------------

@internal("sessions.AddNote")
@dataclass(frozen=True, slots=True, kw_only=True)
class AddNote:
    """Keep ``text`` (a task's outcome, say) for the next call on ``key``'s
    session, resumed or fresh, which carries it once. Once per ``note_id``:
    added again, even after it was given, nothing changes. Once the note is
    durable, ``acknowledge_to`` (if any) is told ``inbox.NoticeTaken``."""

    key: str = field(metadata=limit(512))
    note_id: str = field(metadata=limit(512))
    text: str = field(metadata=limit(MAX_NOTE))
    acknowledge_to: str = ""


@request("sessions.Notes", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Notes(Request["PendingNotes"]):
    """The notes waiting for the next call on ``key``'s session, oldest first."""

    key: str = field(metadata=limit(512))


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    note_id: str
    text: str


@reply("sessions.PendingNotes")
@dataclass(frozen=True, slots=True, kw_only=True)
class PendingNotes:
    key: str
    notes: tuple[Note, ...]


@request("sessions.Open", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Open(Request["Opened"]):
    """What a call on ``key``'s session starts from, in one ask: the mapping
    (``Lookup``) and the notes waiting for it (``Notes``)."""

    key: str = field(metadata=limit(512))
    prompt_version: int


@reply("sessions.Opened")
@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    key: str
    session: Session | None
    """None: no mapping of ``key`` written under the prompt version asked for."""
    notes: tuple[Note, ...]


@request("sessions.Forget", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Forget(Request["Forgotten"]):
    key: str = field(metadata=limit(512))


@reply("sessions.Forgotten")
@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    key: str
    existed: bool


@request("sessions.ReadHistory", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadHistory(Request["History"]):
    """The message history of ``key`` if it belongs to ``native_id`` (else empty)."""

    key: str = field(metadata=limit(512))
    native_id: str = field(metadata=limit(512))


@reply("sessions.History")
@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    key: str
    messages: tuple[HistoryMessage, ...]


# -- a forgotten fact, asked by the Memory actor --------------------------------


@internal("sessions.ForgetFact")
@dataclass(frozen=True, slots=True, kw_only=True)
class ForgetFact(Request["FactForgotten"]):
    """A fact was forgotten: no copy kept here may send it to a model again.
    Each of ``texts`` becomes ``tombstone`` in every kept history; a native
    session (one with no kept history, its transcript the runtime's) used
    since ``since``, when the fact first existed, may have been given it, in
    its startup context or a recall, and is reset: its mapping dropped, so
    the next turn starts a new session with a fresh context. Idempotent."""

    texts: tuple[str, ...]
    tombstone: str
    since: float


@reply("sessions.FactForgotten")
@dataclass(frozen=True, slots=True, kw_only=True)
class FactForgotten:
    histories: int
    """Kept histories changed."""
    sessions: int
    """Native sessions reset."""
