"""A reply's delivery as a state machine: plain code, no threads, no storage.

Each record is the journal entry of one reply that needed more than its
first attempt's success::

    (none) ──first attempt──▶ retryable_failure / terminal_failure
    retryable_failure ──back-off passed──▶ in_flight ──▶ delivered / retryable_failure / terminal_failure

The first attempt costs the outbox no commit (one commit per event, on the
chat path's hottest step, measured at a quarter of its throughput): the
inbox's commit of the reply marks it in flight (``Deliver`` says which
daemon made that commit), and if it succeeds, the inbox's commit of the
completed receipt records it; the outbox tells the inbox at once. So an
attempt left unanswered by an earlier daemon, whether its first (no record)
or a later one (``in_flight``), has an unknown outcome: it is sent again only
where the channel promises idempotent delivery, else it becomes
``not_resent``. ``pending`` (journaled, not yet sent) is only read:
daemons before the outbox wrote it before such a re-send.

A reply longer than its channel takes goes out as numbered parts
(``enact.chat.parts``), one message each, in order. The record names the
part its state is about: each part's success is journaled together with the
next part going in flight (one commit per part after the first), so a part
known sent is never sent again. A part an earlier daemon left in flight is
given up as above (noted in ``unsure_parts``) and the parts after it, which
never started, are sent; the reply then ends ``not_resent``, saying which
part's outcome is unknown.

Within one daemon, a non-idempotent channel may also answer ``unsure``: its
request was written whole but the answer was lost (the connection broke or
timed out afterwards), so the message may or may not have arrived. A call
that failed before its request was written whole is an ordinary retryable
failure: nothing can have arrived. For an unsure answer the rule is *resend
once, marked*: a chat owner is worse off missing a reply than seeing one
twice, and Telegram offers no way to read back what a bot sent, so the part
is sent once more with ``repeat`` set (the channel marks the message as a
possible repeat; noted in ``repeated_parts``, so a later daemon marks it
too). If that resend is unsure as well, or no attempt is left, the part is
given up like one a stopped daemon left in flight: at most two copies, the
second marked. (After a crash an attempt in flight stays ``not_resent``:
the reply's turn is long over by then, as the channel's declaration says.)
"""

from __future__ import annotations

import dataclasses
import enum

from enact.commands import clip
from enact.messages.outbox import DeliveryRecord, DeliveryState
from enact.retry import Backoff

MAX_ERROR = 2000
NOT_RESENT = (
    "the daemon stopped while the reply was being delivered, and the channel cannot re-send it safely: not resent"
)
PARTS_NOT_RESENT = (
    "{which} of {parts}: the daemon stopped while it was being delivered, and the channel cannot re-send it "
    "safely: not resent; the other parts were delivered"
)
UNSURE_NOT_RESENT = (
    "the connection broke after the reply was sent, twice (once more marked as a possible repeat), so whether "
    "it arrived is unknown, and the channel cannot re-send it safely: not sent a third time"
)


class Step(enum.Enum):
    """What the outbox does with a ``Deliver``, given the journal's record."""

    SEND = "send"  # call the channel (journaling in_flight first, unless it is the first attempt)
    REPORT = "report"  # finished already: tell the outcome again
    WAIT = "wait"  # this daemon's call, or its retry, will answer
    GIVE_UP = "give_up"  # an earlier daemon's call has an unknown outcome: not resent


def on_deliver(record: DeliveryRecord | None, *, first: bool, replied_by: int, generation: int,
               idempotent: bool) -> Step:
    """``Deliver`` comes once ``first`` after the reply's commit, and again
    whenever the inbox resumes the event (at start-up, on a redelivered
    event); the journal and the generations make it idempotent."""
    if record is None:
        if first:
            return Step.SEND
        if replied_by == generation:
            return Step.WAIT  # the first attempt is under way in this daemon
        return Step.SEND if idempotent else Step.GIVE_UP
    if record.outcome is not None:
        return Step.REPORT  # the inbox's commit of it may have been lost
    if record.generation == generation:
        return Step.WAIT
    if record.state is DeliveryState.IN_FLIGHT:
        return Step.SEND if idempotent else Step.GIVE_UP
    return Step.SEND  # pending or retryable, left by an earlier daemon


def new_record(*, channel: str, conversation: str, message_id: str, text: str, parts: int, generation: int,
               now: float) -> DeliveryRecord:
    """The record of a first attempt (of the first part), before its answer is applied."""
    return DeliveryRecord(channel=channel, conversation=conversation, message_id=message_id, text=text,
                          state=DeliveryState.IN_FLIGHT, attempts=1, error="", updated_at=now, generation=generation,
                          parts=parts)


def next_attempt(record: DeliveryRecord, *, generation: int, now: float) -> DeliveryRecord:
    return dataclasses.replace(record, state=DeliveryState.IN_FLIGHT, attempts=record.attempts + 1,
                               updated_at=now, generation=generation)


def answered(record: DeliveryRecord, *, ok: bool, retryable: bool, error: str, policy: Backoff,
             now: float, unsure: bool = False) -> DeliveryRecord:
    """The channel's answer to the attempt in flight: its end state, or, for
    a part sent with parts after it, the next part in flight. ``unsure``: the
    request went out whole and its answer was lost, on a channel that cannot
    re-send safely (see the module's text)."""
    if ok and record.part + 1 < record.parts:
        return _next_part(record, generation=record.generation, now=now)
    if ok:
        return _finished(record, now=now)
    if unsure and (record.part in record.repeated_parts or policy.exhausted(record.attempts)):
        record = given_up(record, generation=record.generation, now=now)
        if record.state is DeliveryState.NOT_RESENT and record.parts == 1:
            record = dataclasses.replace(record, error=UNSURE_NOT_RESENT)
        return record
    if unsure:
        record = dataclasses.replace(record, repeated_parts=(*record.repeated_parts, record.part))
        retryable = True
    if retryable and not policy.exhausted(record.attempts):
        state = DeliveryState.RETRYABLE_FAILURE
    else:
        state = DeliveryState.TERMINAL_FAILURE
    if record.parts > 1:
        error = f"part {record.part + 1} of {record.parts}: {error}"
    return dataclasses.replace(record, state=state, error=clip(error, MAX_ERROR), updated_at=now)


def repeats(record: DeliveryRecord) -> bool:
    """The part in flight is sent again after an unsure attempt: the channel marks it."""
    return record.part in record.repeated_parts


def sends_next_part(record: DeliveryRecord) -> bool:
    """The answered or given-up record has the next part in flight: send it."""
    return record.state is DeliveryState.IN_FLIGHT


def retry_delay(policy: Backoff, attempts: int, retry_after_s: float) -> float:
    """The back-off before a retry, never shorter than the channel asked."""
    return max(policy.delay(attempts), retry_after_s)


def answers(stored: DeliveryRecord | None, attempt: DeliveryRecord) -> bool:
    """An answer belongs to the attempt the journal holds in flight (none
    for a first attempt of the first part)."""
    if stored is None:
        return attempt.attempts == 1 and attempt.part == 0
    return stored.state is DeliveryState.IN_FLIGHT and stored.attempts == attempt.attempts \
        and stored.part == attempt.part


def recorded_by_the_inbox(stored: DeliveryRecord | None, record: DeliveryRecord) -> bool:
    """A first attempt that succeeded needs no record of its own: the inbox
    completes the event in the commit that logs its turn."""
    return stored is None and record.state is DeliveryState.DELIVERED


def given_up(record: DeliveryRecord, *, generation: int, now: float) -> DeliveryRecord:
    """The part in flight had an unknown outcome: not resent; the next part
    goes in flight (by this daemon), or, after the last, the reply ends."""
    record = dataclasses.replace(record, unsure_parts=(*record.unsure_parts, record.part))
    if record.part + 1 < record.parts:
        return _next_part(record, generation=generation, now=now)
    return _finished(record, now=now)


def _next_part(record: DeliveryRecord, *, generation: int, now: float) -> DeliveryRecord:
    return dataclasses.replace(record, state=DeliveryState.IN_FLIGHT, part=record.part + 1, attempts=1, error="",
                               updated_at=now, generation=generation)


def _finished(record: DeliveryRecord, *, now: float) -> DeliveryRecord:
    """Every part sent or given up."""
    if not record.unsure_parts:
        return dataclasses.replace(record, state=DeliveryState.DELIVERED, error="", updated_at=now)
    if record.parts == 1:
        error = NOT_RESENT
    else:
        numbers = [str(part + 1) for part in record.unsure_parts]
        which = f"part {numbers[0]}" if len(numbers) == 1 else f"parts {', '.join(numbers)}"
        error = PARTS_NOT_RESENT.format(which=which, parts=record.parts)
    return dataclasses.replace(record, state=DeliveryState.NOT_RESENT, error=error, updated_at=now)


def retry_due(record: DeliveryRecord | None) -> bool:
    """A retry timer fired: it is still due unless something else ran it."""
    return record is not None and record.state in (DeliveryState.RETRYABLE_FAILURE, DeliveryState.PENDING)
