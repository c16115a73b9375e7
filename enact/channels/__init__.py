"""Chat channels: where events come from and replies go.

A channel hands events to the inbox, delivers replies, and declares what it
can promise (``idempotent_delivery``: re-sending a reply whose first delivery
had an unknown outcome does no harm) and take (``max_message_length``). A channel comes with a
``ChannelComponent`` (``enact.components``); the daemon starts each channel
once the actors run, handing it an ``InboxInlet``, and stops it before them.
The ``local`` and ``telegram`` channels implement this small interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.messages.common import NotFound, Origin

# Every CLI command imports this package (the channels' components live in
# it): the inbox's protocol is imported by the calls that speak it.
if TYPE_CHECKING:
    from enact.actors._asks import Asker
    from enact.fence import Fence
    from enact.messages.channel import ChannelState
    from enact.messages.common import Origin
    from enact.messages.inbox import Accepted, ChatEvent, Ignored, Outcome
    from enact.metrics import Metrics


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingReply:
    event_id: str
    channel: str
    conversation: str
    message_id: str
    text: str
    """The text of this message: the whole reply, or one of its parts."""
    attempt: int
    part: int = 0
    """Which part of the reply (from 0) this is, of ``parts``."""
    parts: int = 1
    repeat: bool = False
    """An earlier send of this message may have arrived (its answer was
    lost): a non-idempotent channel marks this one as a possible repeat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryReport:
    ok: bool
    retryable: bool = False
    error: str = ""
    retry_after_s: float = 0.0
    """The channel asked to wait at least this long before a retry."""
    unsure: bool = False
    """The request went out whole, then its answer was lost: the message may
    have arrived. Only a channel without idempotent delivery need say so;
    before the request was written whole a failure is plainly retryable."""


INBOX = "inbox"


class InboxRefused(EnactError, RuntimeError):
    """The inbox refused what a channel asked: an event of a channel it does
    not know, or the outcome of an event it never took."""


class InboxInlet:
    """What a started channel is handed: its way into the inbox, bound to
    the channel and to the origin its component vouches for (``chat:<channel>``,
    or ``human-cli`` for the local channel), so that a channel submits events
    of its own channel only and cannot choose who it speaks for."""

    def __init__(self, channel: str, ask: Asker, *, origin: Origin, fence: Fence | None = None,
                 metrics: Metrics | None = None) -> None:
        self.channel = channel
        self.origin = origin
        self._ask = ask
        """Asks the daemon's actors; the inlet asks the inbox only."""
        self.fence = fence
        """The daemon's epoch fence: a polling channel stops once it trips."""
        self.metrics = metrics

    def submit(self, event: ChatEvent) -> Accepted | Ignored:
        from enact.messages.inbox import Receive

        if event.channel != self.channel:
            raise ValueError(f"the {self.channel} channel cannot submit an event of channel {event.channel!r}")
        reply = self._ask(INBOX, Receive(event=event, origin=self.origin))
        if isinstance(reply, NotFound):
            raise InboxRefused(f"the inbox refused an event of the {self.channel} channel: {reply.line}")
        return reply

    def cursor(self) -> int:
        """The channel's cursor as the inbox last committed it (0: none yet)."""
        from enact.messages.inbox import GetCursor

        return self._ask(INBOX, GetCursor(channel=self.channel)).cursor

    def outcome(self, event_id: str) -> Outcome:
        """The recorded outcome of an event the inbox accepted."""
        from enact.messages.inbox import GetOutcome

        reply = self._ask(INBOX, GetOutcome(event_id=event_id))
        if isinstance(reply, NotFound):
            raise InboxRefused(f"the inbox has {reply.line}")
        return reply


class Channel(Protocol):
    name: str
    idempotent_delivery: bool
    max_message_length: int
    """The longest message the channel takes (0: no limit); the outbox sends a
    longer reply as numbered parts (``enact.chat.parts``), each journaled.
    Keep it unchanged across releases: a stored reply is cut again at each
    attempt, and one whose parts no longer match fails for good."""

    def start(self, inbox: InboxInlet) -> None:
        """Begin receiving events (a polling channel starts its loop here)."""

    def stop(self) -> None: ...

    def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        """Deliver one message (a reply, or one part of it). May block; the
        outbox calls it off its thread, unless the channel has an attribute
        ``delivers_at_once`` that is true (``delivers_at_once(channel)``: its
        ``deliver`` never blocks nor raises and does nothing outside the
        daemon, as the local channel's without a deliver command, which
        answers its caller once the turn's completion is committed, fenced),
        when it is called without a fence check before it: a reply's first
        attempt, in one part, by the inbox as the turn ends (the commit of
        the reply completes the event too: no outbox, one commit fewer),
        a later one on the outbox's thread."""

    def acknowledge(self, cursor: int) -> None:
        """Every event up to ``cursor`` is finished; the channel may drop them."""

    def finished(self, outcome: Outcome) -> None:
        """An event is done (replied and logged, or terminally failed)."""

    def state(self) -> ChannelState:
        """How the channel runs, for ``enact channel list`` and ``enact status``."""


def delivers_at_once(channel: Channel) -> bool:
    """The channel's ``deliver`` returns at once (``Channel.deliver``)."""
    return bool(getattr(channel, "delivers_at_once", False))
