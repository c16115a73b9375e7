"""The inbox's rules over its LMDB databases, without threads.

``Inbox`` is what the ``inbox`` actor runs, in the shape of
``enact.tasks.queue.TaskQueue``: each method takes the message (and the
time, where a record keeps it), stages its write in the group commit
(``batch``) and returns the reply; what must happen once a write is durable
(hand an event to its conversation, tell the outbox to deliver, acknowledge
a channel's cursor, publish ``TurnLogged`` ...) is collected as effects
(``enact.chat.inbox_effects``),
which the actor takes with ``take_effects`` after each commit and carries
out. The receipt state machine itself (each step's write) is
``enact.chat.receipts``.

The path of one event, each step committed before the next begins:

1. ``Receive``: the receipt is committed (``processing``) and the event goes
   to its conversation actor. A redelivery of a completed or in-flight event
   is answered as a duplicate and not processed again.
2. ``TurnFinished``: the reply is stored on the receipt (``replied``), then
   the outbox is told to ``Deliver`` it; a reply whose channel takes it at
   once (``enact.channels.delivers_at_once``, the local channel's) is
   delivered on the spot and its event completed as in step 3, in the same
   commit as the reply: no outbox, one commit fewer. ``TurnFailed``: the failure is
   recorded and the event retried, at most ``chat.max_attempts`` in all; then
   one diagnostic reply is delivered.
3. ``Delivered`` (the outbox's answer, once the delivery is finished): the
   turn is logged, the receipt completed and the cursor advanced, in one
   transaction; then the channel hears the outcome and ``TurnLogged`` is
   published.

At start-up (``recover``), unfinished receipts are resumed, and the outbox is
told again to deliver every reply not yet completed: its journal makes that
idempotent (a finished delivery is only reported again). Then, and every
``SETTLE_EVERY`` receipts, the next commit also moves the old records into
the older trees (``InboxRecords.settle``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from enact.actors._batching import Deferred, WriteBatch
from enact.channels import OutgoingReply
from enact.chat.inbox_effects import (
    Acknowledge,
    ConversationDone,
    Count,
    CountDelivery,
    Effect,
    Finished,
    Later,
    Publish,
    Tell,
    ToConversation,
)
from enact.chat.inbox_records import SETTLE_EVERY, InboxRecords, sequence_of
from enact.chat.notices import notice_event
from enact.chat.receipts import GiveUp, ReceiptRules, Received, Resumption, RetryIn, diagnostic
from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome
from enact.chat.redaction import pattern_of
from enact.chat.turns import read_turns
from enact.messages.common import NotFound
from enact.messages.inbox import (
    Accepted,
    ActionRecord,
    ChatEvent,
    Cursor,
    Delivered,
    HandleEvent,
    Ignored,
    NoticeTaken,
    Notify,
    Outcome,
    ReadTurns,
    Receive,
    RedactTurns,
    Retry,
    TurnFailed,
    TurnFinished,
    TurnLogged,
    Turns,
    TurnsRedacted,
)
from enact.messages.outbox import Deliver
from enact.messages.sessions import MAX_NOTE, AddNote
from enact.ownership import ConversationLock
from enact.retry import Backoff
from enact.storage import Store

log = logging.getLogger(__name__)

OUTBOX = "outbox"
SESSIONS = "sessions"


class Inbox:
    """``channels``: the channels this daemon has; ``running``: whether a
    conversation actor holds an event's turn (the keyed pool, kept by the
    supervisor, so an inbox that restarted sees the work still running);
    ``deliver_at_once``: delivers a reply there and then if its channel
    takes it so (``enact.channels.delivers_at_once``) and says whether it
    did; not given, every reply goes through the outbox."""

    def __init__(self, store: Store, *, name: str, generation: int, channels: Collection[str],
                 lock: ConversationLock, attempts: Backoff, running: Callable[[str], bool],
                 refused_for_budget: Callable[[ChatEvent], str | None] | None = None,
                 deliver_at_once: Callable[[OutgoingReply], bool] | None = None) -> None:
        self._store = store
        self._refused_for_budget = refused_for_budget
        """Why an event is refused because the conversation budget is spent (``budget.conversation =
        "refuse"``), or None; not given: never."""
        self.batch = WriteBatch(store, owner=name)
        self.records = InboxRecords(store)
        self.rules = ReceiptRules(self.records, attempts)
        self._name = name
        self._generation = generation
        self._channels = channels
        self._lock = lock
        self._running = running
        self._effects: list[Effect] = []
        # Events whose next attempt is being committed, not yet handed over.
        self._resuming: set[str] = set()
        # Events handed over in effects the actor has not taken yet.
        self._handing: set[str] = set()
        self._deliver_at_once = deliver_at_once
        # The event and attempt of each turn handed to a conversation and not
        # yet answered: what a reply delivered at once is addressed by.
        self._turns: dict[str, tuple[ChatEvent, int]] = {}
        self._received_since_settle = 0

    def take_effects(self) -> list[Effect]:
        """What the commits so far call for, in order; the actor carries it out at once."""
        effects, self._effects = self._effects, []
        self._handing.clear()
        return effects

    def commit(self) -> list[Effect]:
        """Commit what is staged; what it calls for."""
        self.batch.flush()
        return self.take_effects()

    def _busy(self, event_id: str) -> bool:
        """A turn of the event is running in this process (a delivery needs no
        such mark: the outbox's journal makes a repeated ``Deliver`` harmless)."""
        return event_id in self._resuming or event_id in self._handing or self._running(event_id)

    # -- 1. receiving -----------------------------------------------------------

    def receive(self, message: Receive, now: float) -> Deferred | Ignored | NotFound:
        event = message.event
        event_id = event.event_id
        if event.channel not in self._channels:
            return NotFound(kind="channel", id=event.channel)
        if not self._lock.allows(event):
            log.info("ignored event %s from %s: outside chat.allowed_conversations", event_id, event.conversation_key)
            self._effects.append(Count(event.channel, "not_allowed"))
            if event.cursor is not None:
                self._finish_cursor(event.channel, event.cursor)
            return Ignored(event_id=event_id, reason="conversation is not in chat.allowed_conversations")
        refused = self._refused_for_budget(event) if self._refused_for_budget is not None else None
        if refused is not None:
            log.info("refused event %s from %s: %s", event_id, event.conversation_key, refused)
            self._effects.append(Count(event.channel, "over_budget"))
            if event.cursor is not None:
                self._finish_cursor(event.channel, event.cursor)
            return Ignored(event_id=event_id, reason=refused)

        reply = Deferred()

        def after(received: Received) -> None:
            if received.duplicate:
                reply.resolve(self._duplicate(event_id, received.key, received.receipt))
                return
            self._effects.append(Count(event.channel, "accepted"))
            if event.cursor is not None:
                self.rules.cursors.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=1, origin=message.origin)
            reply.resolve(Accepted(event_id=event_id, duplicate=False, in_flight=True))

        self.batch.stage(lambda txn: self.rules.receive(txn, event, origin=message.origin,
                                                        generation=self._generation, now=now),
                         after, failed=reply.fail)
        self._received_since_settle += 1
        if self._received_since_settle >= SETTLE_EVERY:
            self._settle()
        return reply

    def _settle(self) -> None:
        """Move the old records into the older trees, in the next commit
        (``InboxRecords.settle``); again at the next event if some are left."""
        self._received_since_settle = 0

        def after(more: bool) -> None:
            if more:
                self._received_since_settle = SETTLE_EVERY

        def failed(error: Exception) -> None:
            # Nothing is lost: the records stay in the recent trees, where they are read as well.
            log.warning("moving old receipts and turns into the older trees failed: %s", error)

        self.batch.stage(self.records.settle, after, failed=failed, told=True)

    def _duplicate(self, event_id: str, key: bytes, receipt: Receipt) -> Accepted:
        self._effects.append(Count(receipt.event.channel, "duplicate"))
        if not receipt.finished and not self._busy(event_id):
            # Left unfinished by an earlier daemon and not yet resumed: resume it now.
            self._resume(event_id, key, receipt)
        return Accepted(event_id=event_id, duplicate=True, in_flight=not receipt.finished)

    def _dispatch(self, event_id: str, event: ChatEvent, *, attempt: int, origin: str) -> None:
        handle = HandleEvent(event_id=event_id, event=event, attempt=attempt, origin=origin)
        if self._deliver_at_once is not None:
            self._turns[event_id] = (event, attempt)
        self._resuming.discard(event_id)
        self._handing.add(event_id)
        self._effects.append(ToConversation(event.conversation_key, event_id, handle))

    # -- 2. the conversation's answer ---------------------------------------------

    def turn_finished(self, message: TurnFinished, now: float) -> None:
        outcome = TurnOutcome.RUNTIME_FAILED if message.runtime_failure else TurnOutcome.REPLIED
        turn = self._turns.pop(message.event_id, None)
        if turn is not None and self._delivered_at_once(message, *turn):
            event, _ = turn
            self._effects.append(ConversationDone(message.event_id))

            def after(finished: tuple[Receipt, int] | None) -> None:
                if finished is not None:
                    self._effects.append(CountDelivery(event.channel))
                    self._announce(*finished)

            self.batch.stage(lambda txn: self.rules.reply_delivered(
                txn, message.event_id, message.reply, message.actions, outcome,
                runtime_failure=message.runtime_failure, generation=self._generation, now=now), after)
            return
        self._turn_finished(message.event_id, message.reply, message.actions, outcome,
                            runtime_failure=message.runtime_failure)

    def _delivered_at_once(self, message: TurnFinished, event: ChatEvent, attempt: int) -> bool:
        """The reply delivered there and then, its channel taking it so (its
        call does nothing outside the daemon, so it goes before the commit
        that records it; should that commit fail, the event is resumed)."""
        if self._deliver_at_once is None:
            return False
        return self._deliver_at_once(OutgoingReply(
            event_id=message.event_id, channel=event.channel, conversation=event.conversation,
            message_id=event.message_id, text=message.reply, attempt=attempt))

    def turn_failed(self, message: TurnFailed) -> None:
        self._turns.pop(message.event_id, None)
        self._effects.append(ConversationDone(message.event_id))

        def after(receipt: Receipt | None) -> None:
            if receipt is None:
                return
            self._effects.append(Count(receipt.event.channel, "attempt_failed"))
            log.warning("event %s failed on attempt %d: %s", message.event_id, receipt.attempts, message.error_class)
            match self.rules.after_failure(message.event_id, receipt):
                case RetryIn(delay_s=delay_s):
                    self._effects.append(Later(delay_s, Retry(event_id=message.event_id)))
                case GiveUp(diagnostic=text):
                    self._turn_finished(message.event_id, text, (), TurnOutcome.FAILED)

        self.batch.stage(lambda txn: self.rules.fail_attempt(txn, message.event_id, message.error_class,
                                                             message.error), after)

    def retry(self, event_id: str) -> None:
        if self._busy(event_id):
            return  # a redelivery resumed it already
        self.batch.stage(
            lambda txn: self.records.find(txn, event_id),
            lambda found: self._resume(event_id, *found) if found and not self._busy(event_id) else None,
        )

    def _resume(self, event_id: str, key: bytes, receipt: Receipt) -> None:
        """Start the next attempt of an unfinished event, or give up on it."""
        match self.rules.resumption(receipt):
            case Resumption.DELIVER:
                self._deliver(key, receipt)
                return
            case Resumption.GIVE_UP:
                self._turn_finished(event_id, diagnostic(event_id, receipt), (), TurnOutcome.FAILED)
                return
            case Resumption.NOTHING:
                return
        # Marked at once, so a redelivery meanwhile does not resume it twice.
        self._resuming.add(event_id)

        def after(current: Receipt) -> None:
            event = current.event
            if event.cursor is not None:
                self.rules.cursors.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=current.attempts, origin=current.origin)

        self.batch.stage(lambda txn: self.rules.start_attempt(txn, key, generation=self._generation),
                         after, failed=lambda _: self._resuming.discard(event_id))

    def _turn_finished(self, event_id: str, reply: str, actions: tuple[ActionRecord, ...],
                       outcome: TurnOutcome, *, runtime_failure: str = "") -> None:
        """Store the reply; the outbox is told to deliver it once that is
        durable. ``runtime_failure`` (``<class>: <reason>``) is kept as the
        attempt's error, which the outcome and the turn report."""
        self._effects.append(ConversationDone(event_id))
        self.batch.stage(
            lambda txn: self.rules.store_reply(txn, event_id, reply, actions, outcome, runtime_failure=runtime_failure,
                                               generation=self._generation),
            lambda stored: self._deliver(*stored, first=True) if stored is not None else None,
        )

    def notify(self, message: Notify, now: float) -> None:
        """A notice is a receipt already replied: delivered like a reply."""
        if message.channel not in self._channels:
            # Kept, it would be told again for good: the channel is gone
            # from this daemon's configuration (it may never come back).
            self._acknowledge(message)
            log.warning("notice %s dropped: unknown channel %r", message.notice_id, message.channel)
            return
        event = notice_event(message)

        def after(stored: tuple[bytes, Receipt] | None) -> None:
            if message.session_note:
                # The note waits in the sessions store for the conversation's
                # next call; the store acknowledges the notice once it holds
                # it (told again, it adds nothing: once per notice id).
                self._effects.append(Tell(SESSIONS, AddNote(
                    key=event.conversation_key, note_id=message.notice_id, text=message.session_note[:MAX_NOTE],
                    acknowledge_to=message.acknowledge_to)))
            else:
                self._acknowledge(message)
            if stored is not None:
                self._deliver(*stored, first=True)

        self.batch.stage(lambda txn: self.rules.store_notice(txn, message, generation=self._generation, now=now),
                         after)

    def _acknowledge(self, message: Notify) -> None:
        if message.acknowledge_to:
            self._effects.append(Tell(message.acknowledge_to, NoticeTaken(notice_id=message.notice_id)))

    # -- 3. delivery -----------------------------------------------------------

    def _deliver(self, key: bytes, receipt: Receipt, *, first: bool = False) -> None:
        """Tell the outbox to deliver the committed reply: ``first`` right
        after its commit, else again on resuming the event."""
        event = receipt.event
        self._effects.append(Tell(OUTBOX, Deliver(
            event_id=receipt.event_id, sequence=sequence_of(key), channel=event.channel,
            conversation=event.conversation, message_id=event.message_id, text=receipt.reply,
            reply_to=self._name, replied_by=receipt.generation, first=first,
        )))

    def delivered(self, message: Delivered, now: float) -> None:
        def after(finished: tuple[Receipt, int] | None) -> None:
            if finished is not None:
                self._announce(*finished)

        self.batch.stage(lambda txn: self.rules.complete(txn, message.event_id, message.outcome, message.error,
                                                         now=now), after)

    def _settle_cursor(self, channel: str, finished: int) -> None:
        """After the commit: forget the finished cursor and tell the channel."""
        target = self.rules.cursors.of(channel).finished(finished)
        if channel in self._channels:
            self._effects.append(Acknowledge(channel, target))

    def _finish_cursor(self, channel: str, cursor: int) -> None:
        target = self.rules.cursors.of(channel).target(cursor)
        self.batch.stage(
            lambda txn: self.rules.write_cursor(txn, channel, target),
            lambda _: self._settle_cursor(channel, cursor),
        )

    def _announce(self, receipt: Receipt, cursor: int) -> None:
        event = receipt.event
        if event.cursor is not None:
            self._settle_cursor(event.channel, event.cursor)
        self._effects.append(Count(event.channel, str(receipt.outcome)))
        if event.channel in self._channels:
            self._effects.append(Finished(event.channel, receipt.outcome_of()))
        self._effects.append(Publish(TurnLogged(event_id=receipt.event_id, cursor=cursor, outcome=str(receipt.outcome),
                                                conversation_key=event.conversation_key)))

    # -- redaction (a fact forgotten with --redact) ------------------------------

    def redact(self, message: RedactTurns) -> Deferred | TurnsRedacted:
        pattern = pattern_of(message.texts)
        if pattern is None:
            return TurnsRedacted(turns=0, receipts=0)
        reply = Deferred()
        self.batch.stage(lambda txn: self.rules.redact(txn, pattern, message.tombstone), reply.resolve,
                         failed=reply.fail)
        return reply

    # -- start-up recovery --------------------------------------------------

    def recover(self) -> None:
        for key, receipt in self._store.read(self.rules.unfinished):
            event = receipt.event
            if event.cursor is not None:
                self.rules.cursors.of(event.channel).received(event.cursor)
            if self._busy(receipt.event_id):
                continue  # this inbox restarted; the turn is still running
            if receipt.status is ReceiptStatus.PROCESSING:
                log.info("resuming event %s (attempt %d so far)", receipt.event_id, receipt.attempts)
            self._resume(receipt.event_id, key, receipt)
        self._settle()

    # -- reading (after what is staged is committed) ------------------------------

    def outcome(self, event_id: str) -> Outcome | NotFound:
        self.batch.flush()
        return self.committed_outcome(event_id)

    def turns(self, message: ReadTurns) -> Turns:
        self.batch.flush()
        return self.committed_turns(message)

    def cursor(self, channel: str) -> Cursor:
        self.batch.flush()
        return self.committed_cursor(channel)

    # The committed state alone, which any thread may read: the actor's idle
    # reads (enact.actors._idle_reads), and the above once they flushed.

    def committed_outcome(self, event_id: str) -> Outcome | NotFound:
        found = self._store.read(lambda txn: self.records.find(txn, event_id))
        return NotFound(kind="event", id=event_id) if found is None else found[1].outcome_of()

    def committed_turns(self, message: ReadTurns) -> Turns:
        return self._store.read(lambda txn: read_turns(txn, self.records.turns, message))

    def committed_cursor(self, channel: str) -> Cursor:
        return Cursor(channel=channel, cursor=self._store.read(lambda txn: self.records.cursor(txn, channel)))
