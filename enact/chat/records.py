"""The inbox's records as frozen dataclasses: receipts and cursors (a logged
turn is stored as the ``inbox.Turn`` the protocol sends).

They are stored as the same JSON objects the inbox wrote as plain documents
(enums by value), so homes written before need no migration; a field added
since has a default that reads the older records.
"""

from __future__ import annotations

import dataclasses
import enum

from enact.commands import clip
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import ActionRecord, ChatEvent, Outcome, Turn

MAX_ERROR = 2000
MAX_REPORTED_ERROR = 500
"""How much of an event's last error its outcome and turn carry."""
INTERRUPTED = "Interrupted"
"""The failure class of an attempt the daemon stopped in the middle of."""


class ReceiptStatus(enum.StrEnum):
    PROCESSING = "processing"  # a turn is running or will be resumed
    REPLIED = "replied"  # the reply is stored; its delivery is the outbox's
    COMPLETED = "completed"
    FAILED = "failed"  # completed with the diagnostic reply


class TurnOutcome(enum.StrEnum):
    UNDECIDED = ""  # no reply yet
    REPLIED = "replied"
    FAILED = "failed"  # gave up: the diagnostic reply
    RUNTIME_FAILED = "runtime_failed"  # the runtime could not answer: the reply is the advice to the owner
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_UNCERTAIN = "delivery_uncertain"


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptError:
    attempt: int
    error: str
    """``<class>: <message>``, bounded."""
    error_class: str = ""
    """"" in receipts written before it was stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """One event's durable receipt, from its arrival to its completion."""

    event_id: str
    event: ChatEvent
    origin: str
    status: ReceiptStatus
    attempts: int
    errors: tuple[AttemptError, ...]
    reply: str
    actions: tuple[ActionRecord, ...]
    outcome: TurnOutcome
    generation: int
    """The daemon that made the latest attempt, or committed the reply."""
    received_at: float
    finished_at: float | None
    delivery_error: str = ""

    @property
    def finished(self) -> bool:
        return self.status in (ReceiptStatus.COMPLETED, ReceiptStatus.FAILED)

    @property
    def last_error(self) -> str:
        """The error that ended or last troubled the event: its delivery's,
        else its latest attempt's."""
        error = self.delivery_error or (self.errors[-1].error if self.errors else "")
        return clip(error, MAX_REPORTED_ERROR)

    @property
    def last_error_class(self) -> str:
        """The class of the latest attempt's failure; for receipts that
        predate ``error_class``, read from its text."""
        if not self.errors:
            return INTERRUPTED
        last = self.errors[-1]
        return last.error_class or last.error.split(":", 1)[0]

    def outcome_of(self) -> Outcome:
        return Outcome(event_id=self.event_id, status=str(self.outcome or self.status), duplicate=False,
                       reply=self.reply, actions=self.actions, attempts=self.attempts, error=self.last_error)


@dataclass(frozen=True, slots=True, kw_only=True)
class CursorRecord:
    cursor: int


def new_receipt(event: ChatEvent, *, origin: str, generation: int, now: float) -> Receipt:
    return Receipt(event_id=event.event_id, event=event, origin=origin, status=ReceiptStatus.PROCESSING,
                   attempts=1, errors=(), reply="", actions=(), outcome=TurnOutcome.UNDECIDED,
                   generation=generation, received_at=now, finished_at=None)


def failed_attempt(receipt: Receipt, error_class: str, error: str) -> Receipt:
    entry = AttemptError(attempt=receipt.attempts, error=clip(f"{error_class}: {error}", MAX_ERROR),
                         error_class=error_class)
    return dataclasses.replace(receipt, errors=(*receipt.errors, entry))


def finished(receipt: Receipt, delivery_outcome: TurnOutcome | None, delivery_error: str, *, now: float) -> Receipt:
    """The receipt once its delivery ended (``None``: delivered)."""
    return dataclasses.replace(
        receipt,
        status=ReceiptStatus.FAILED if receipt.outcome is TurnOutcome.FAILED else ReceiptStatus.COMPLETED,
        outcome=delivery_outcome or receipt.outcome,
        delivery_error=delivery_error if delivery_outcome else receipt.delivery_error,
        finished_at=now,
    )


def turn_of(receipt: Receipt, *, now: float) -> Turn:
    """The turn of a finished receipt (the turn log gives it its cursor)."""
    event = receipt.event
    return Turn(event_id=receipt.event_id, channel=event.channel, conversation=event.conversation,
                message_id=event.message_id, message=event.text, reply=receipt.reply, time=now,
                outcome=receipt.outcome.value, attempts=receipt.attempts, actions=receipt.actions,
                error=receipt.last_error)
