"""The inbox protocol: chat events in, outcomes and turns out."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import MAX_ID, MAX_TEXT, NotFound, Origin
from enact.messages.outbox import DeliveryOutcome


def conversation_key(channel: str, conversation: str) -> str:
    """A conversation's name across channels: ``channel:conversation``."""
    return f"{channel}:{conversation}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """Metadata only; the content stays with the channel (at ``path``, if fetched)."""

    kind: str = field(metadata=limit(64))
    name: str = field(default="", metadata=limit(MAX_ID))
    mime_type: str = field(default="", metadata=limit(128))
    size: int = 0
    path: str = field(default="", metadata=limit(4096))
    """Where the channel stored the content in the home; "" if it did not fetch it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEvent:
    """One incoming chat message. Its identity is (channel, conversation,
    message_id); ``cursor`` is the channel's position, where it has one."""

    channel: str = field(metadata=limit(64))
    conversation: str = field(metadata=limit(MAX_ID))
    message_id: str = field(metadata=limit(MAX_ID))
    text: str = field(metadata=limit(MAX_TEXT))
    sender: str = field(default="", metadata=limit(MAX_ID))
    cursor: int | None = None
    thread_id: str = field(default="", metadata=limit(MAX_ID))
    reply_to: str = field(default="", metadata=limit(MAX_TEXT))
    attachments: tuple[Attachment, ...] = field(default=(), metadata=limit(32))

    @property
    def conversation_key(self) -> str:
        return conversation_key(self.channel, self.conversation)

    @property
    def event_id(self) -> str:
        """A stable id of the event's identity, safe as a key and in logs."""
        import hashlib  # here: OpenSSL's loading would cost every command that speaks to the inbox a start-up

        identity = f"{self.channel}\0{self.conversation}\0{self.message_id}".encode()
        return hashlib.sha256(identity).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRecord:
    """One action the model asked for, and the receipt it got back."""

    command: str
    args: dict[str, Any]
    receipt: str
    ok: bool


@request("inbox.Receive", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Receive(Request["Accepted | Ignored | NotFound"]):
    """A channel hands over an event. The answer says whether it was taken."""

    event: ChatEvent
    origin: Origin = ""


@reply("inbox.Accepted")
@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    event_id: str
    duplicate: bool
    in_flight: bool


@reply("inbox.Ignored")
@dataclass(frozen=True, slots=True, kw_only=True)
class Ignored:
    """Not processed at all (a conversation outside the lock)."""

    event_id: str
    reason: str


@request("inbox.GetOutcome", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class GetOutcome(Request["Outcome | NotFound"]):
    event_id: str = field(metadata=limit(MAX_ID))


@reply("inbox.Outcome")
@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    event_id: str
    status: str
    duplicate: bool
    reply: str
    actions: tuple[ActionRecord, ...]
    attempts: int
    error: str = ""
    """The last error recorded on the event (an attempt's, or its delivery's), bounded."""


@request("inbox.GetCursor", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class GetCursor(Request["Cursor"]):
    """How far the channel's events are finished and acknowledged."""

    channel: str = field(metadata=limit(64))


@reply("inbox.Cursor")
@dataclass(frozen=True, slots=True, kw_only=True)
class Cursor:
    channel: str
    cursor: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One finished event, as ``logs.turns`` stores it and ``Turns`` sends it."""

    cursor: int = 0
    """Its key in the turn log (0 until it is logged); turns logged before
    the cursor was stored with them read it from their key."""
    event_id: str
    channel: str
    conversation: str
    message_id: str
    message: str
    reply: str
    time: float
    outcome: str
    attempts: int
    actions: tuple[ActionRecord, ...]
    error: str = ""
    """As ``Outcome.error``; "" in turns logged before it was recorded."""

    @property
    def is_notice(self) -> bool:
        """enact told the owner this unasked (``Notify``): no one wrote a message."""
        return self.message_id.startswith(NOTICE_MESSAGE_ID)


@request("inbox.ReadTurns")
@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTurns(Request["Turns"]):
    """Turns after ``since`` (a cursor), optionally of one conversation key
    (``channel:id``) or conversation id: the oldest ``limit`` of them, or,
    when ``last`` is set, the newest ``last`` (oldest first either way)."""

    conversation: str = field(default="", metadata=limit(MAX_ID))
    since: int = 0
    limit: int = 100
    last: int = 0


@reply("inbox.Turns")
@dataclass(frozen=True, slots=True, kw_only=True)
class Turns:
    turns: tuple[Turn, ...]
    next_cursor: int
    cut_short: bool = False
    """Fewer turns than asked for, to keep the reply under the frame: read
    on from ``next_cursor`` (with ``last``, the older ones were left out)."""


# -- between the inbox and its conversations -------------------------------


@internal("inbox.HandleEvent")
@dataclass(frozen=True, slots=True, kw_only=True)
class HandleEvent:
    event_id: str
    event: ChatEvent
    attempt: int
    origin: Origin


@internal("inbox.TurnFinished")
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinished:
    event_id: str
    reply: str
    actions: tuple[ActionRecord, ...]
    runtime_failure: str = ""
    """Set when the runtime could not answer (``<failure class>: <reason>``)
    and ``reply`` is the advice to the owner: the turn ends ``runtime_failed``."""


@internal("inbox.TurnFailed")
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFailed:
    event_id: str
    error_class: str
    error: str


@internal("inbox.Retry")
@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    event_id: str


@internal("inbox.Delivered")
@dataclass(frozen=True, slots=True, kw_only=True)
class Delivered:
    """The outbox's answer to ``outbox.Deliver``: how the delivery ended."""

    event_id: str
    outcome: DeliveryOutcome
    error: str


# -- events the inbox publishes ----------------------------------------------


@reply("inbox.TurnLogged")
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnLogged:
    """An event is finished and its turn is in the log at ``cursor`` (read it
    with ``ReadTurns(since=cursor - 1)``)."""

    event_id: str
    cursor: int
    conversation_key: str
    outcome: str


# -- redaction, asked by the Memory actor when a fact is forgotten -------------


@internal("inbox.RedactTurns")
@dataclass(frozen=True, slots=True, kw_only=True)
class RedactTurns(Request["TurnsRedacted"]):
    """Replace each of ``texts`` (matched ignoring case and runs of
    whitespace) by ``tombstone`` in every logged turn and stored receipt:
    the messages, the replies and the action receipts."""

    texts: tuple[str, ...]
    tombstone: str


@reply("inbox.TurnsRedacted")
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnsRedacted:
    turns: int
    """Logged turns changed."""
    receipts: int


# -- notices: what enact tells the owner unasked ---------------------------------

NOTICE_MESSAGE_ID = "notice:"
"""A notice's event has message id ``notice:<notice_id>`` and no text."""


@internal("inbox.Notify")
@dataclass(frozen=True, slots=True, kw_only=True)
class Notify:
    """Tell the owner ``text`` on a conversation, unasked (a task's outcome),
    through the same journaled delivery as a reply, and give that
    conversation's next call on its session ``session_note`` as recent
    context (not a request; ``sessions.AddNote``). Once per ``notice_id``:
    told again, nothing is sent again."""

    channel: str
    conversation: str
    notice_id: str
    text: str
    session_note: str
    origin: Origin
    acknowledge_to: str = ""
    """An actor told ``inbox.NoticeTaken`` once the notice is stored (or
    found stored), and its session note too: a notifier that keeps its
    notices until then."""


@internal("inbox.NoticeTaken")
@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeTaken:
    """The inbox holds notice ``notice_id`` durably (and the sessions store
    its note): telling it again is not needed."""

    notice_id: str

