"""The outbox protocol: deliver a stored reply through its channel, once;
and the delivery journal's record."""

from __future__ import annotations

import enum

from enact.frozen_dataclass import dataclass
from enact.messages._registry import internal


class DeliveryOutcome(enum.StrEnum):
    """How a delivery ended; the failures are the event's outcome as stored."""

    DELIVERED = "delivered"
    FAILED = "delivery_failed"
    UNCERTAIN = "delivery_uncertain"


class DeliveryState(enum.StrEnum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DELIVERED = "delivered"
    RETRYABLE_FAILURE = "retryable_failure"
    TERMINAL_FAILURE = "terminal_failure"
    NOT_RESENT = "not_resent"


_OUTCOMES = {
    DeliveryState.DELIVERED: DeliveryOutcome.DELIVERED,
    DeliveryState.TERMINAL_FAILURE: DeliveryOutcome.FAILED,
    DeliveryState.NOT_RESENT: DeliveryOutcome.UNCERTAIN,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRecord:
    """One reply's delivery, as ``inbox.deliveries`` stores it (see
    ``enact.chat.deliveries`` for its states)."""

    channel: str
    conversation: str
    message_id: str
    text: str
    state: DeliveryState
    attempts: int
    error: str
    updated_at: float
    generation: int = 0
    """The daemon (fence generation) that made the latest attempt; 0 in records
    written before it was stored, which were all written by earlier daemons."""
    part: int = 0
    """The part (from 0) the state is about, of a reply sent in ``parts``
    (``enact.chat.parts``); a delivered reply's last part."""
    parts: int = 1
    unsure_parts: tuple[int, ...] = ()
    """Parts whose outcome a stopped daemon (or a second broken connection) left unknown, not resent."""
    repeated_parts: tuple[int, ...] = ()
    """Parts sent once more, marked as a possible repeat, after a send whose
    answer was lost (``enact.chat.deliveries``)."""

    @property
    def outcome(self) -> DeliveryOutcome | None:
        """How it ended, or None while it is not finished."""
        return _OUTCOMES.get(self.state)


@internal("outbox.Deliver")
@dataclass(frozen=True, slots=True, kw_only=True)
class Deliver:
    """Deliver a committed reply; answered by telling ``reply_to`` an
    ``inbox.Delivered`` once the delivery is finished. Idempotent: telling it
    again for the same ``sequence`` never sends the reply twice."""

    event_id: str
    sequence: int
    """The receipt's number, which keys the delivery journal."""
    channel: str
    conversation: str
    message_id: str
    text: str
    reply_to: str
    replied_by: int
    """The generation of the daemon that committed the reply."""
    first: bool
    """Told right after that commit (not again on resuming the event)."""


@internal("outbox.RetryDelivery")
@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDelivery:
    """A failed delivery's back-off has passed."""

    event_id: str
    sequence: int
    reply_to: str


@internal("outbox.ChannelAnswered")
@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelAnswered:
    """The channel's answer to one attempt, from the delivery thread."""

    event_id: str
    sequence: int
    reply_to: str
    attempt: DeliveryRecord
    """The attempt as it went out (not journaled yet, if it was the first)."""
    ok: bool
    retryable: bool
    error: str
    retry_after_s: float = 0.0
    """The channel asked to wait at least this long before a retry."""
    unsure: bool = False
    """The request went out whole but its answer was lost: it may have arrived."""
