"""The inbox: every chat event's durable receipt, its delivery and its turn.

The path of one event, each step committed before the next begins (writes of
queued messages share one group commit, see ``_batching``):

1. ``Receive``: the receipt is committed (``processing``) and the event goes
   to its conversation actor. A redelivery of a completed or in-flight event
   is answered as a duplicate and not processed again.
2. ``TurnFinished``: the reply is stored on the receipt (``replied``), then
   the outbox is told to ``Deliver`` it. ``TurnFailed``: the failure is
   recorded and the event retried, at most ``chat.max_attempts`` in all; then
   one diagnostic reply is delivered.
3. ``Delivered`` (the outbox's answer, once the delivery is finished): the
   turn is logged, the receipt completed and the cursor advanced, in one
   transaction; then the channel hears the outcome and ``TurnLogged`` is
   published.

At start-up, unfinished receipts are resumed, and the outbox is told again to
deliver every reply not yet completed: its journal makes that idempotent (a
finished delivery is only reported again).

Each step's write and what follows it are plain rules in
``enact.chat.receipts``; this actor carries out what they return.
"""

from __future__ import annotations

import logging
from typing import Any

from enact.actors._asks import ActorNotFound
from enact.actors._base import STARTED, ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.actors.supervisor import ActorSpec
from enact.chat.conversation_actor import ConversationActor
from enact.chat.inbox_records import InboxRecords, sequence_of
from enact.chat.notices import notice_event
from enact.chat.receipts import GiveUp, ReceiptRules, Received, Resumption, RetryIn, diagnostic
from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome
from enact.chat.redaction import pattern_of
from enact.chat.services import ChatServices
from enact.chat.turns import read_turns
from enact.messages.common import NotFound
from enact.messages.inbox import (
    Accepted,
    ActionRecord,
    ChatEvent,
    Cursor,
    Delivered,
    GetCursor,
    GetOutcome,
    HandleEvent,
    Ignored,
    NoticeTaken,
    Notify,
    Outcome,
    ReadTurns,
    Receive,
    RedactTurns,
    Retry,
    SessionNote,
    TurnFailed,
    TurnFinished,
    TurnLogged,
    TurnsRedacted,
)
from enact.messages.outbox import Deliver
from enact.ownership import ConversationLock
from enact.retry import Backoff

log = logging.getLogger(__name__)

_RETRY_FIRST_S = 0.2
OUTBOX = "outbox"


CONVERSATIONS = "conversation"
"""The family of the conversation actors, a keyed pool the inbox keeps."""


def conversation_actor_name(conversation_key: str) -> str:
    return f"{CONVERSATIONS}:{conversation_key}"


class InboxActor(EnactActor):
    def __init__(self, context: ActorContext, *, services: ChatServices) -> None:
        super().__init__(context)
        self._services = services
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._records = InboxRecords(self._store)
        config = context.config
        self._chat_lock = ConversationLock(config["chat.allowed_conversations"], services.origins)
        self._rules = ReceiptRules(self._records, Backoff(first_s=_RETRY_FIRST_S, factor=2.0,
                                                          attempts=config["chat.max_attempts"]))
        self._cursor_rule = self._rules.cursors
        self._metrics = context.metrics
        # The conversation actors, and which events they hold: kept by the
        # supervisor, so a restarted inbox sees the work still running.
        self._conversations = context.supervisor.pool(
            CONVERSATIONS, self._conversation_spec, idle_s=config["chat.conversation_idle_s"]
        )
        # Events whose next attempt is being committed, not yet handed over.
        self._resuming: set[str] = set()

    # -- life cycle ---------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if message is STARTED:
            # Recovery runs here, not in on_start: the supervisor asks this
            # once it can address this actor by name (and waits for it), so
            # the answers to what recovery tells others find this actor.
            self._recover()
            self._batch.flush()
        return super().on_receive(message)

    def on_stop(self) -> None:
        super().on_stop()
        self.cancel_timers()

    # -- messages -----------------------------------------------------------

    def handle(self, message: Any) -> Any:
        match message:
            case Receive():
                return self._receive(message)
            case TurnFinished():
                outcome = TurnOutcome.RUNTIME_FAILED if message.runtime_failure else TurnOutcome.REPLIED
                return self._turn_finished(message.event_id, message.reply, message.actions, outcome,
                                           runtime_failure=message.runtime_failure)
            case TurnFailed():
                return self._turn_failed(message)
            case Retry():
                return self._retry(message.event_id)
            case Delivered():
                return self._delivered(message)
            case GetOutcome():
                self._batch.flush()
                return self._outcome(message.event_id)
            case ReadTurns():
                self._batch.flush()
                return self._store.read(lambda txn: read_turns(txn, self._records.turns, message))
            case Notify():
                return self._notify(message)
            case GetCursor():
                self._batch.flush()
                stored = self._store.read(lambda txn: self._records.cursor(txn, message.channel))
                return Cursor(channel=message.channel, cursor=stored)
            case RedactTurns():
                return self._redact(message)
        return super().handle(message)

    def _busy(self, event_id: str) -> bool:
        """A turn of the event is running in this process (a delivery needs no
        such mark: the outbox's journal makes a repeated ``Deliver`` harmless)."""
        return event_id in self._resuming or self._conversations.running(event_id)

    # -- 1. receiving -----------------------------------------------------------

    def _receive(self, message: Receive) -> Deferred | Ignored | NotFound:
        event = message.event
        event_id = event.event_id
        if event.channel not in self._services.channels:
            return NotFound(kind="channel", id=event.channel)
        if not self._chat_lock.allows(event):
            log.info("ignored event %s from %s: outside chat.allowed_conversations", event_id, event.conversation_key)
            self._metrics.inbox_events.labels(channel=event.channel, outcome="not_allowed").inc()
            if event.cursor is not None:
                self._finish_cursor(event.channel, event.cursor)
            return Ignored(event_id=event_id, reason="conversation is not in chat.allowed_conversations")

        reply = Deferred()

        def after(received: Received) -> None:
            if received.duplicate:
                reply.resolve(self._duplicate(event_id, received.key, received.receipt))
                return
            self._metrics.inbox_events.labels(channel=event.channel, outcome="accepted").inc()
            if event.cursor is not None:
                self._cursor_rule.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=1, origin=message.origin)
            reply.resolve(Accepted(event_id=event_id, duplicate=False, in_flight=True))

        self._batch.stage(lambda txn: self._rules.receive(txn, event, origin=message.origin,
                                                          generation=self.context.fence.generation),
                          after, failed=reply.fail)
        return reply

    def _duplicate(self, event_id: str, key: bytes, receipt: Receipt) -> Accepted:
        self._metrics.inbox_events.labels(channel=receipt.event.channel, outcome="duplicate").inc()
        if not receipt.finished and not self._busy(event_id):
            # Left unfinished by an earlier daemon and not yet resumed: resume it now.
            self._resume(event_id, key, receipt)
        return Accepted(event_id=event_id, duplicate=True, in_flight=not receipt.finished)

    def _conversation_spec(self, conversation: str) -> ActorSpec:
        return ActorSpec(name=conversation_actor_name(conversation), actor=ConversationActor,
                         options={"services": self._services})

    def _dispatch(self, event_id: str, event: ChatEvent, *, attempt: int, origin: str) -> None:
        handle = HandleEvent(event_id=event_id, event=event, attempt=attempt, origin=origin)
        self._resuming.discard(event_id)
        self._conversations.tell(event.conversation_key, event_id, handle)

    # -- 2. the conversation's answer ---------------------------------------------

    def _turn_failed(self, message: TurnFailed) -> None:
        self._conversations.done(message.event_id)

        def after(receipt: Receipt | None) -> None:
            if receipt is None:
                return
            self._metrics.inbox_events.labels(channel=receipt.event.channel, outcome="attempt_failed").inc()
            log.warning("event %s failed on attempt %d: %s", message.event_id, receipt.attempts, message.error_class)
            match self._rules.after_failure(message.event_id, receipt):
                case RetryIn(delay_s=delay_s):
                    self.tell_later(delay_s, Retry(event_id=message.event_id))
                case GiveUp(diagnostic=text):
                    self._turn_finished(message.event_id, text, (), TurnOutcome.FAILED)

        self._batch.stage(lambda txn: self._rules.fail_attempt(txn, message.event_id, message.error_class,
                                                               message.error), after)

    def _retry(self, event_id: str) -> None:
        if self._busy(event_id):
            return  # a redelivery resumed it already
        self._batch.stage(
            lambda txn: self._records.find(txn, event_id),
            lambda found: self._resume(event_id, *found) if found and not self._busy(event_id) else None,
        )

    def _resume(self, event_id: str, key: bytes, receipt: Receipt) -> None:
        """Start the next attempt of an unfinished event, or give up on it."""
        match self._rules.resumption(receipt):
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
                self._cursor_rule.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=current.attempts, origin=current.origin)

        self._batch.stage(lambda txn: self._rules.start_attempt(txn, key, generation=self.context.fence.generation),
                          after, failed=lambda _: self._resuming.discard(event_id))

    def _turn_finished(self, event_id: str, reply: str, actions: tuple[ActionRecord, ...],
                       outcome: TurnOutcome, *, runtime_failure: str = "") -> None:
        """Store the reply; the outbox is told to deliver it once that is
        durable. ``runtime_failure`` (``<class>: <reason>``) is kept as the
        attempt's error, which the outcome and the turn report."""
        self._conversations.done(event_id)

        self._batch.stage(
            lambda txn: self._rules.store_reply(txn, event_id, reply, actions, outcome, runtime_failure=runtime_failure,
                                                generation=self.context.fence.generation),
            lambda stored: self._deliver(*stored, first=True) if stored is not None else None,
        )

    def _notify(self, message: Notify) -> None:
        """A notice is a receipt already replied: delivered like a reply."""
        if message.channel not in self._services.channels:
            # Kept, it would be told again for good: the channel is gone
            # from this daemon's configuration (it may never come back).
            self._acknowledge(message)
            log.warning("notice %s dropped: unknown channel %r", message.notice_id, message.channel)
            return
        event_id = notice_event(message).event_id

        def after(stored: tuple[bytes, Receipt] | None) -> None:
            self._acknowledge(message)
            if stored is None:
                return
            self._deliver(*stored, first=True)
            if message.session_note:
                key = notice_event(message).conversation_key
                self._conversations.tell(key, event_id, SessionNote(conversation_key=key, text=message.session_note))
                self._conversations.done(event_id)  # nothing waits for the note

        self._batch.stage(lambda txn: self._rules.store_notice(txn, message, generation=self.context.fence.generation),
                          after)

    def _acknowledge(self, message: Notify) -> None:
        if not message.acknowledge_to:
            return
        try:
            self.context.tell(message.acknowledge_to, NoticeTaken(notice_id=message.notice_id))
        except ActorNotFound:  # restarting: it tells the notice again, which finds it taken
            log.info("notice %s: %s is not running to hear it was taken", message.notice_id,
                     message.acknowledge_to)

    # -- 3. delivery -----------------------------------------------------------

    def _deliver(self, key: bytes, receipt: Receipt, *, first: bool = False) -> None:
        """Tell the outbox to deliver the committed reply: ``first`` right
        after its commit, else again on resuming the event."""
        event = receipt.event
        self.context.tell(OUTBOX, Deliver(
            event_id=receipt.event_id, sequence=sequence_of(key), channel=event.channel,
            conversation=event.conversation, message_id=event.message_id, text=receipt.reply,
            reply_to=self.context.name, replied_by=receipt.generation, first=first,
        ))

    def _delivered(self, message: Delivered) -> None:
        def after(finished: tuple[Receipt, int] | None) -> None:
            if finished is not None:
                self._announce(*finished)

        self._batch.stage(lambda txn: self._rules.complete(txn, message.event_id, message.outcome, message.error),
                          after)

    def _settle_cursor(self, channel: str, finished: int) -> None:
        """After the commit: forget the finished cursor and tell the channel."""
        target = self._cursor_rule.of(channel).finished(finished)
        channel_object = self._services.channels.get(channel)
        if channel_object is not None:
            channel_object.acknowledge(target)

    def _finish_cursor(self, channel: str, cursor: int) -> None:
        target = self._cursor_rule.of(channel).target(cursor)
        self._batch.stage(
            lambda txn: self._rules.write_cursor(txn, channel, target),
            lambda _: self._settle_cursor(channel, cursor),
        )

    def _announce(self, receipt: Receipt, cursor: int) -> None:
        event = receipt.event
        if event.cursor is not None:
            self._settle_cursor(event.channel, event.cursor)
        self._metrics.inbox_events.labels(channel=event.channel, outcome=str(receipt.outcome)).inc()
        channel = self._services.channels.get(event.channel)
        if channel is not None:
            channel.finished(receipt.outcome_of())
        self.context.publish(TurnLogged(event_id=receipt.event_id, cursor=cursor, outcome=str(receipt.outcome),
                                        conversation_key=event.conversation_key))

    # -- redaction (a fact forgotten with --redact) ------------------------------

    def _redact(self, message: RedactTurns) -> Deferred | TurnsRedacted:
        pattern = pattern_of(message.texts)
        if pattern is None:
            return TurnsRedacted(turns=0, receipts=0)

        reply = Deferred()
        self._batch.stage(lambda txn: self._rules.redact(txn, pattern, message.tombstone), reply.resolve,
                          failed=reply.fail)
        return reply

    # -- start-up recovery --------------------------------------------------

    def _recover(self) -> None:
        for key, receipt in self._store.read(self._rules.unfinished):
            event = receipt.event
            if event.cursor is not None:
                self._cursor_rule.of(event.channel).received(event.cursor)
            if self._busy(receipt.event_id):
                continue  # this inbox restarted; the turn is still running
            if receipt.status is ReceiptStatus.PROCESSING:
                log.info("resuming event %s (attempt %d so far)", receipt.event_id, receipt.attempts)
            self._resume(receipt.event_id, key, receipt)

    # -- reading ------------------------------------------------------------

    def _outcome(self, event_id: str) -> Outcome | NotFound:
        found = self._store.read(lambda txn: self._records.find(txn, event_id))
        return NotFound(kind="event", id=event_id) if found is None else found[1].outcome_of()
