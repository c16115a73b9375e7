"""The inbox's receipt state machine, without threads.

``ReceiptRules`` is what the ``inbox`` actor runs: each step of a receipt
(received, an attempt failed or started, the reply or a notice stored, the
delivery's end) is one write inside the actor's group-committed transaction,
takes the fence's generation and the time as arguments and returns what the actor then
carries out: the receipt stored, or nothing when the step no longer applies
(an answer told again for an event already past it). What comes after a
failed attempt and what resuming an unfinished receipt means are decided by
plain functions of the receipt (``after_failure``, ``resumption``).

The channel cursors' rule (``enact.chat.cursor``) is kept here, since a
completed receipt advances its channel's cursor in the same commit.
"""

from __future__ import annotations

import dataclasses
import enum
import re

import lmdb

from enact.chat import records
from enact.chat.cursor import Cursors
from enact.chat.inbox_records import OPEN, InboxRecords
from enact.chat.notices import notice_event, notice_receipt
from enact.chat.records import CursorRecord, Receipt, ReceiptStatus, TurnOutcome
from enact.chat.redaction import redacted_receipt, redacted_turn
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import ActionRecord, ChatEvent, Notify, TurnsRedacted
from enact.messages.outbox import DeliveryOutcome
from enact.retry import Backoff
from enact.storage import CorruptRecord


@dataclass(frozen=True, slots=True)
class Received:
    """A receipt written for an event, or the one it already had."""

    key: bytes
    receipt: Receipt
    duplicate: bool


@dataclass(frozen=True, slots=True)
class RetryIn:
    """The failed event is tried again after ``delay_s``."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """No attempt is left: the diagnostic is the event's reply."""

    diagnostic: str


class Resumption(enum.Enum):
    """What resuming an unfinished receipt means."""

    DELIVER = "deliver"  # replied: its reply is delivered (again)
    ATTEMPT = "attempt"  # processing, attempts left: the next attempt starts
    GIVE_UP = "give_up"  # processing, no attempt left
    NOTHING = "nothing"  # finished meanwhile


class ReceiptRules:
    def __init__(self, records: InboxRecords, attempts: Backoff) -> None:
        self.records = records
        self.attempts = attempts
        self.cursors = Cursors()

    # -- decisions ------------------------------------------------------------

    def after_failure(self, event_id: str, receipt: Receipt) -> RetryIn | GiveUp:
        if not self.attempts.exhausted(receipt.attempts):
            return RetryIn(self.attempts.delay(receipt.attempts))
        return GiveUp(diagnostic(event_id, receipt))

    def resumption(self, receipt: Receipt) -> Resumption:
        if receipt.status is ReceiptStatus.REPLIED:
            return Resumption.DELIVER
        if receipt.status is not ReceiptStatus.PROCESSING:
            return Resumption.NOTHING
        return Resumption.GIVE_UP if self.attempts.exhausted(receipt.attempts) else Resumption.ATTEMPT

    # -- writes ---------------------------------------------------------------

    def receive(self, txn: lmdb.Transaction, event: ChatEvent, *, origin: str, generation: int,
                now: float) -> Received:
        found = self.records.find(txn, event.event_id)
        if found is not None:
            return Received(*found, duplicate=True)
        receipt = records.new_receipt(event, origin=origin, generation=generation, now=now)
        return Received(self.records.create(txn, event.event_id, receipt), receipt, duplicate=False)

    def fail_attempt(self, txn: lmdb.Transaction, event_id: str, error_class: str, error: str) -> Receipt | None:
        """The attempt's error, kept on a receipt still processing."""
        found = self.records.find(txn, event_id)
        if found is None or found[1].status is not ReceiptStatus.PROCESSING:
            return None
        key, receipt = found
        receipt = records.failed_attempt(receipt, error_class, error)
        self.records.receipts.put(txn, key, receipt)
        return receipt

    def start_attempt(self, txn: lmdb.Transaction, key: bytes, *, generation: int) -> Receipt:
        current = self.records.receipts.get(txn, key)
        if current is None:
            raise CorruptRecord(OPEN, key, "marks a receipt that does not exist")
        current = dataclasses.replace(current, attempts=current.attempts + 1, generation=generation)
        self.records.receipts.put(txn, key, current)
        return current

    def store_reply(self, txn: lmdb.Transaction, event_id: str, reply: str, actions: tuple[ActionRecord, ...],
                    outcome: TurnOutcome, *, runtime_failure: str, generation: int) -> tuple[bytes, Receipt] | None:
        """The reply on a receipt still processing (``replied``);
        ``runtime_failure`` (``<class>: <reason>``) is kept as the attempt's
        error, which the outcome and the turn report."""
        replied = self._replied(txn, event_id, reply, actions, outcome, runtime_failure=runtime_failure,
                                generation=generation)
        if replied is not None:
            self.records.receipts.put(txn, *replied)
        return replied

    def _replied(self, txn: lmdb.Transaction, event_id: str, reply: str, actions: tuple[ActionRecord, ...],
                 outcome: TurnOutcome, *, runtime_failure: str, generation: int) -> tuple[bytes, Receipt] | None:
        """The receipt with its reply, not yet stored."""
        found = self.records.find(txn, event_id)
        if found is None or found[1].status is not ReceiptStatus.PROCESSING:
            return None
        key, receipt = found
        if runtime_failure:
            error_class, _, error = runtime_failure.partition(": ")
            receipt = records.failed_attempt(receipt, error_class, error)
        return key, dataclasses.replace(receipt, status=ReceiptStatus.REPLIED, reply=reply, actions=actions,
                                        outcome=outcome, generation=generation)

    def store_notice(self, txn: lmdb.Transaction, message: Notify, *, generation: int,
                     now: float) -> tuple[bytes, Receipt] | None:
        """A notice is a receipt already replied; told again, nothing."""
        event_id = notice_event(message).event_id
        if self.records.find(txn, event_id) is not None:
            return None  # told again: sent (or being sent) already
        receipt = notice_receipt(message, generation=generation, now=now)
        return self.records.create(txn, event_id, receipt), receipt

    def complete(self, txn: lmdb.Transaction, event_id: str, delivery: DeliveryOutcome, delivery_error: str, *,
                 now: float) -> tuple[Receipt, int] | None:
        """The delivery ended: log the turn, complete the receipt, advance
        the cursor, in one commit. Returns the receipt and the turn's cursor;
        nothing for a delivery whose event is finished."""
        found = self.records.find(txn, event_id)
        if found is None or found[1].status is not ReceiptStatus.REPLIED:
            return None
        return self._complete(txn, *found, delivery, delivery_error, now=now)

    def reply_delivered(self, txn: lmdb.Transaction, event_id: str, reply: str, actions: tuple[ActionRecord, ...],
                        outcome: TurnOutcome, *, runtime_failure: str, generation: int,
                        now: float) -> tuple[Receipt, int] | None:
        """``store_reply`` and ``complete`` (delivered) in one write, for a
        reply its channel took at once (``enact.channels.delivers_at_once``:
        nothing outside the daemon was done): returns what ``complete`` does."""
        replied = self._replied(txn, event_id, reply, actions, outcome, runtime_failure=runtime_failure,
                                generation=generation)
        if replied is None:
            return None
        return self._complete(txn, *replied, DeliveryOutcome.DELIVERED, "", now=now)

    def _complete(self, txn: lmdb.Transaction, key: bytes, receipt: Receipt, delivery: DeliveryOutcome,
                  delivery_error: str, *, now: float) -> tuple[Receipt, int]:
        failed = None if delivery is DeliveryOutcome.DELIVERED else TurnOutcome(delivery.value)
        receipt = records.finished(receipt, failed, delivery_error, now=now)
        cursor = self.records.turns.append(txn, records.turn_of(receipt, now=now))
        self.records.receipts.put(txn, key, receipt)
        self.records.open.delete(txn, key)
        event = receipt.event
        if event.cursor is not None:
            self.write_cursor(txn, event.channel, self.cursors.of(event.channel).target(event.cursor))
        return receipt, cursor

    def write_cursor(self, txn: lmdb.Transaction, channel: str, target: int) -> None:
        """A channel's cursor only moves forward."""
        if target > self.records.cursor(txn, channel):
            self.records.cursors.put(txn, channel.encode(), CursorRecord(cursor=target))

    def redact(self, txn: lmdb.Transaction, pattern: re.Pattern[str], tombstone: str) -> TurnsRedacted:
        turns = [(key, changed) for key, turn in self.records.turns.items(txn)
                 if (changed := redacted_turn(turn, pattern, tombstone)) is not None]
        receipts = [(key, scrubbed) for key, receipt in self.records.receipts.items(txn)
                    if (scrubbed := redacted_receipt(receipt, pattern, tombstone)) is not None]
        for key, turn in turns:
            self.records.turns.put(txn, key, turn)
        for key, receipt in receipts:
            self.records.receipts.put(txn, key, receipt)
        return TurnsRedacted(turns=len(turns), receipts=len(receipts))

    # -- reads ------------------------------------------------------------------

    def unfinished(self, txn: lmdb.Transaction) -> list[tuple[bytes, Receipt]]:
        """Every receipt marked open, to resume at start."""
        found = []
        for key, _ in self.records.open.items(txn):
            receipt = self.records.receipts.get(txn, key)
            if receipt is None:
                raise CorruptRecord(OPEN, key, "marks a receipt that does not exist")
            found.append((key, receipt))
        return found


def diagnostic(event_id: str, receipt: Receipt) -> str:
    """The one reply of an event given up on."""
    return (
        f"enact could not process message {receipt.event.message_id} (event {event_id}) after "
        f"{receipt.attempts} attempts; failure class: {receipt.last_error_class}. "
        "The failure is recorded on the event's receipt; it will not be retried."
    )
