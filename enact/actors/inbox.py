"""The inbox: every chat event's durable receipt, its delivery and its turn.

The path of one event, each step committed before the next begins (writes of
queued messages share one group commit, see ``_batching``):

1. ``Receive``: the receipt is committed (``processing``) and the event goes
   to its conversation actor. A redelivery of a completed or in-flight event
   is answered as a duplicate and not processed again.
2. ``TurnFinished``: the reply is stored on the receipt and its delivery is
   journaled ``in_flight`` before the channel is called (off this thread).
   ``TurnFailed``: the failure is recorded and the event retried, at most
   ``chat.max_attempts`` in all; then one diagnostic reply is delivered.
3. ``Delivered``: the turn is logged, the receipt completed and the cursor
   advanced, in one transaction. A failed delivery is retried with back-off.

At start-up, unfinished receipts are resumed and unfinished deliveries are
re-sent, or, where the outcome is unknown and the channel cannot promise
idempotent delivery, marked "not resent" and reported.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.actors.chat_services import ChatServices
from enact.actors.conversation import ConversationActor
from enact.actors.inbox_records import (
    OPEN,
    InboxRecords,
    action_documents,
    actions_from,
    delivery_document,
    event_from,
    last_error,
    new_receipt,
    turn_document,
)
from enact.actors.supervisor import ActorSpec
from enact.channels import Channel, OutgoingReply
from enact.chat.cursor import Cursors
from enact.commands import clip
from enact.messages.common import Rejected
from enact.messages.inbox import (
    Accepted,
    ActionRecord,
    ChatEvent,
    Cursor,
    Deliver,
    Delivered,
    GetCursor,
    GetOutcome,
    HandleEvent,
    Ignored,
    NoSuchEvent,
    Outcome,
    ReadTurns,
    Receive,
    Retry,
    Turn,
    TurnFailed,
    TurnFinished,
    Turns,
    conversation_key,
)
from enact.retry import Backoff
from enact.storage import CorruptRecord, Document

log = logging.getLogger(__name__)

MAX_ERROR = 2000
MAX_TURNS_PER_READ = 1000
_RETRY_FIRST_S = 0.2
_NOT_RESENT = (
    "the daemon stopped while the reply was being delivered, and the channel cannot re-send it safely: not resent"
)


def conversation_actor_name(conversation_key: str) -> str:
    return f"conversation:{conversation_key}"


class InboxActor(EnactActor):
    def __init__(self, context: ActorContext, *, services: ChatServices) -> None:
        super().__init__(context)
        self._services = services
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._records = InboxRecords(self._store)
        self._receipts = self._records.receipts
        self._deliveries = self._records.deliveries
        self._cursors = self._records.cursors
        self._turns = self._records.turns
        config = context.config
        self._allowed = frozenset(config["chat.allowed_conversations"])
        self._attempts = Backoff(first_s=_RETRY_FIRST_S, factor=2.0, attempts=config["chat.max_attempts"])
        self._delivery = Backoff(first_s=config["chat.delivery_backoff_s"], factor=2.0,
                                 attempts=config["chat.delivery_attempts"])
        self._metrics = context.metrics
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="enact-deliver")
        self._timers: set[threading.Timer] = set()
        # The conversation actors, and which events they hold: kept by the
        # supervisor, so a restarted inbox sees the work still running.
        self._conversations = context.supervisor.pool(
            "conversation", self._conversation_spec, idle_s=config["chat.conversation_idle_s"]
        )
        # Events whose next attempt is being committed, not yet handed over.
        self._resuming: set[str] = set()
        self._cursor_rule = Cursors()

    # -- life cycle ---------------------------------------------------------

    def on_start(self) -> None:
        self._recover()
        self._batch.flush()

    def on_stop(self) -> None:
        super().on_stop()
        for timer in list(self._timers):
            timer.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _schedule(self, delay: float, message: Any) -> None:
        """Tell this actor ``message()`` after ``delay`` (whichever incarnation runs then)."""

        def fire() -> None:
            self._timers.discard(timer)
            with contextlib.suppress(Exception):  # the daemon is stopping
                self.context.tell(self.context.name, message())

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        self._timers.add(timer)
        timer.start()

    # -- messages -----------------------------------------------------------

    def handle(self, message: Any) -> Any:
        match message:
            case Receive():
                return self._receive(message)
            case TurnFinished():
                return self._turn_finished(message.event_id, message.reply, message.actions, outcome="replied")
            case TurnFailed():
                return self._turn_failed(message)
            case Retry():
                return self._retry(message.event_id)
            case Deliver():
                return self._deliver(message.event_id)
            case Delivered():
                return self._delivered(message)
            case GetOutcome():
                self._batch.flush()
                return self._outcome(message.event_id)
            case ReadTurns():
                self._batch.flush()
                return self._read_turns(message)
            case GetCursor():
                self._batch.flush()
                stored = self._store.read(lambda txn: self._cursors.get(txn, message.channel.encode()))
                return Cursor(channel=message.channel, cursor=stored["cursor"] if stored else 0)
        return super().handle(message)

    # -- in-memory marks of work running in this process ------------------------

    def _busy(self, event_id: str) -> bool:
        if event_id in self._resuming or self._conversations.running(event_id):
            return True
        services = self._services
        with services.lock:
            return event_id in services.delivering

    def _mark(self, marks: set[str], event_id: str, *, on: bool) -> None:
        with self._services.lock:
            if on:
                marks.add(event_id)
            else:
                marks.discard(event_id)

    # -- 1. receiving -----------------------------------------------------------

    def _allows(self, event: ChatEvent) -> bool:
        if not self._allowed:
            return True
        return event.conversation_key in self._allowed or event.conversation in self._allowed

    def _receive(self, message: Receive) -> Deferred | Ignored | Rejected:
        event = message.event
        event_id = event.event_id
        if event.channel not in self._services.channels:
            return Rejected(reason=f"unknown channel {event.channel!r}")
        if not self._allows(event):
            log.info("ignored event %s from %s: outside chat.allowed_conversations", event_id, event.conversation_key)
            self._metrics.inbox_events.labels(channel=event.channel, outcome="not_allowed").inc()
            if event.cursor is not None:
                self._finish_cursor(event.channel, event.cursor)
            return Ignored(event_id=event_id, reason="conversation is not in chat.allowed_conversations")

        def write(txn: lmdb.Transaction) -> tuple[bool, Document]:
            found = self._records.find(txn, event_id)
            if found is not None:
                return True, found[1]
            receipt = new_receipt(event, origin=message.origin, generation=self.context.fence.generation)
            self._records.create(txn, event_id, receipt)
            return False, receipt

        reply = Deferred()

        def after(result: tuple[bool, Document]) -> None:
            duplicate, receipt = result
            if duplicate:
                reply.resolve(self._duplicate(event_id, receipt))
                return
            self._metrics.inbox_events.labels(channel=event.channel, outcome="accepted").inc()
            if event.cursor is not None:
                self._cursor_rule.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=1, origin=message.origin)
            reply.resolve(Accepted(event_id=event_id, duplicate=False, in_flight=True))

        self._batch.stage(write, after, failed=reply.fail)
        return reply

    def _duplicate(self, event_id: str, receipt: Document) -> Accepted:
        self._metrics.inbox_events.labels(channel=receipt["event"]["channel"], outcome="duplicate").inc()
        finished = receipt["status"] in ("completed", "failed")
        if not finished and not self._busy(event_id):
            # Left unfinished by an earlier daemon and not yet resumed: resume it now.
            self._resume(event_id, receipt)
        return Accepted(event_id=event_id, duplicate=True, in_flight=not finished)

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

        def write(txn: lmdb.Transaction) -> Document | None:
            found = self._records.find(txn, message.event_id)
            if found is None or found[1]["status"] != "processing":
                return None
            key, receipt = found
            error = clip(f"{message.error_class}: {message.error}", MAX_ERROR)
            receipt["errors"] = [*receipt["errors"], {"attempt": receipt["attempts"], "error": error}]
            self._receipts.put(txn, key, receipt)
            return receipt

        def after(receipt: Document | None) -> None:
            if receipt is None:
                return
            self._metrics.inbox_events.labels(channel=receipt["event"]["channel"], outcome="attempt_failed").inc()
            log.warning("event %s failed on attempt %d: %s", message.event_id, receipt["attempts"], message.error_class)
            if not self._attempts.exhausted(receipt["attempts"]):
                self._schedule(self._attempts.delay(receipt["attempts"]), lambda: Retry(event_id=message.event_id))
            else:
                self._give_up(message.event_id, receipt, message.error_class)

        self._batch.stage(write, after)

    def _give_up(self, event_id: str, receipt: Document, error_class: str) -> None:
        event = receipt["event"]
        diagnostic = (
            f"enact could not process message {event['message_id']} (event {event_id}) after "
            f"{receipt['attempts']} attempts; failure class: {error_class}. "
            "The failure is recorded on the event's receipt; it will not be retried."
        )
        self._turn_finished(event_id, diagnostic, (), outcome="failed")

    def _retry(self, event_id: str) -> None:
        if self._busy(event_id):
            return  # a redelivery resumed it already
        self._batch.stage(
            lambda txn: self._records.find(txn, event_id),
            lambda found: self._resume(event_id, found[1]) if found and not self._busy(event_id) else None,
        )

    def _resume(self, event_id: str, receipt: Document) -> None:
        """Start the next attempt of an unfinished event, or give up on it."""
        if receipt["status"] == "replied":
            self._deliver(event_id)
            return
        if receipt["status"] != "processing":
            return
        if self._attempts.exhausted(receipt["attempts"]):
            last = receipt["errors"][-1]["error"] if receipt["errors"] else "Interrupted: the daemon stopped"
            self._give_up(event_id, receipt, last.split(":", 1)[0])
            return
        # Marked at once, so a redelivery meanwhile does not resume it twice.
        self._resuming.add(event_id)

        def write(txn: lmdb.Transaction) -> Document:
            found = self._records.find(txn, event_id)
            assert found is not None
            key, current = found
            current["attempts"] += 1
            current["generation"] = self.context.fence.generation
            self._receipts.put(txn, key, current)
            return current

        def after(current: Document) -> None:
            event = event_from(current["event"])
            if event.cursor is not None:
                self._cursor_rule.of(event.channel).received(event.cursor)
            self._dispatch(event_id, event, attempt=current["attempts"], origin=current["origin"])

        self._batch.stage(write, after, failed=lambda _: self._resuming.discard(event_id))

    def _turn_finished(self, event_id: str, reply: str, actions: tuple[ActionRecord, ...], *, outcome: str) -> None:
        """Store the reply and journal its delivery ``in_flight``; the channel
        is called only once that is durable."""
        self._conversations.done(event_id)
        self._mark(self._services.delivering, event_id, on=True)

        def write(txn: lmdb.Transaction) -> tuple[Document, Document] | None:
            found = self._records.find(txn, event_id)
            if found is None or found[1]["status"] != "processing":
                return None
            key, receipt = found
            receipt.update(status="replied", reply=reply, actions=action_documents(actions), outcome=outcome)
            self._receipts.put(txn, key, receipt)
            delivery = delivery_document(receipt["event"], reply)
            self._deliveries.put(txn, key, delivery)
            return receipt, delivery

        def after(result: tuple[Document, Document] | None) -> None:
            if result is None:
                self._mark(self._services.delivering, event_id, on=False)
                return
            _, delivery = result
            self._call_channel_later(event_id, delivery)

        self._batch.stage(write, after, failed=lambda _: self._mark(self._services.delivering, event_id, on=False))

    # -- 3. delivery -----------------------------------------------------------

    def _deliver(self, event_id: str) -> None:
        """Attempt a pending or retryable delivery again."""
        if event_id in self._services.delivering:
            return
        self._mark(self._services.delivering, event_id, on=True)

        def write(txn: lmdb.Transaction) -> Document | None:
            key = self._records.key_of(txn, event_id)
            delivery = None if key is None else self._deliveries.get(txn, key)
            if delivery is None or delivery["state"] not in ("pending", "retryable_failure"):
                return None
            assert key is not None
            delivery.update(state="in_flight", attempts=delivery["attempts"] + 1, updated_at=time.time())
            self._deliveries.put(txn, key, delivery)
            return delivery

        def after(delivery: Document | None) -> None:
            if delivery is None:
                self._mark(self._services.delivering, event_id, on=False)
            else:
                self._call_channel_later(event_id, delivery)

        # A fenced daemon fails inside the transaction: no channel call follows.
        self._batch.stage(write, after, failed=lambda _: self._mark(self._services.delivering, event_id, on=False))

    def _call_channel_later(self, event_id: str, delivery: Document) -> None:
        channel = self._services.channels.get(delivery["channel"])
        if channel is None:
            self._delivered(Delivered(event_id=event_id, ok=False, retryable=False, error="unknown channel"))
            return
        reply = OutgoingReply(
            event_id=event_id,
            channel=delivery["channel"],
            conversation=delivery["conversation"],
            message_id=delivery["message_id"],
            text=delivery["text"],
            attempt=delivery["attempts"],
        )
        self._executor.submit(self._call_channel, channel, reply)

    def _call_channel(self, channel: Channel, reply: OutgoingReply) -> None:
        """Runs on a delivery thread, so a slow channel never blocks the inbox."""
        try:
            self.context.fence.check()
            report = channel.deliver(reply)
            result = Delivered(event_id=reply.event_id, ok=report.ok, retryable=report.retryable, error=report.error)
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
            result = Delivered(event_id=reply.event_id, ok=False, retryable=True, error=problem)
        try:
            self.context.tell(self.context.name, result)
        except Exception:
            log.warning("delivery result of %s arrived while the daemon stops", reply.event_id)

    def _delivered(self, message: Delivered) -> None:
        def write(txn: lmdb.Transaction) -> tuple[str, Document]:
            key = self._records.key_of(txn, message.event_id)
            delivery = None if key is None else self._deliveries.get(txn, key)
            if key is None or delivery is None or delivery["state"] != "in_flight":
                return "stale", {}
            exhausted = self._delivery.exhausted(delivery["attempts"])
            if message.ok:
                delivery["state"] = "delivered"
            elif message.retryable and not exhausted:
                delivery["state"] = "retryable_failure"
            else:
                delivery["state"] = "terminal_failure"
            delivery.update(error=clip(message.error, MAX_ERROR), updated_at=time.time())
            self._deliveries.put(txn, key, delivery)
            if delivery["state"] == "retryable_failure":
                return "retry", delivery
            receipt = self._finish(txn, key, None if message.ok else "delivery_failed", delivery["error"])
            return "finished", {"delivery": delivery, "receipt": receipt}

        def after(result: tuple[str, Document]) -> None:
            self._mark(self._services.delivering, message.event_id, on=False)
            state, document = result
            if state == "stale":
                return
            channel = document["channel"] if state == "retry" else document["delivery"]["channel"]
            outcome = "ok" if message.ok else "retry" if state == "retry" else "failed"
            self._metrics.deliveries.labels(channel=channel, outcome=outcome).inc()
            if state == "retry":
                log.warning("delivery of %s failed (attempt %d): %s", message.event_id, document["attempts"],
                            message.error)
                self._schedule(self._delivery.delay(document["attempts"]), lambda: Deliver(event_id=message.event_id))
                return
            self._announce(message.event_id, document["receipt"])

        self._batch.stage(write, after, failed=lambda _: self._mark(self._services.delivering, message.event_id,
                                                                    on=False))

    def _finish(self, txn: lmdb.Transaction, key: bytes, delivery_outcome: str | None,
                delivery_error: str = "") -> Document:
        """Log the turn, complete the receipt, advance the cursor: one commit."""
        receipt = self._receipts.get(txn, key)
        assert receipt is not None
        event = receipt["event"]
        outcome = delivery_outcome or receipt["outcome"]
        if delivery_outcome:
            receipt["delivery_error"] = delivery_error
        self._turns.append(txn, turn_document(receipt, outcome))
        receipt.update(
            status="failed" if receipt["outcome"] == "failed" else "completed",
            outcome=outcome,
            finished_at=time.time(),
        )
        self._receipts.put(txn, key, receipt)
        self._records.open.delete(txn, key)
        if event["cursor"] is not None:
            self._write_cursor(txn, event["channel"], self._cursor_rule.of(event["channel"]).target(event["cursor"]))
        return receipt

    def _write_cursor(self, txn: lmdb.Transaction, channel: str, target: int) -> None:
        key = channel.encode()
        stored = self._cursors.get(txn, key)
        if target > (stored["cursor"] if stored else 0):
            self._cursors.put(txn, key, {"cursor": target})

    def _settle_cursor(self, channel: str, finished: int) -> None:
        """After the commit: forget the finished cursor and tell the channel."""
        target = self._cursor_rule.of(channel).finished(finished)
        channel_object = self._services.channels.get(channel)
        if channel_object is not None:
            channel_object.acknowledge(target)

    def _finish_cursor(self, channel: str, cursor: int) -> None:
        target = self._cursor_rule.of(channel).target(cursor)
        self._batch.stage(
            lambda txn: self._write_cursor(txn, channel, target),
            lambda _: self._settle_cursor(channel, cursor),
        )

    def _announce(self, event_id: str, receipt: Document) -> None:
        event = receipt["event"]
        if event["cursor"] is not None:
            self._settle_cursor(event["channel"], event["cursor"])
        self._metrics.inbox_events.labels(channel=event["channel"], outcome=receipt["outcome"]).inc()
        channel = self._services.channels.get(event["channel"])
        if channel is not None:
            channel.finished(self._outcome_of(event_id, receipt))

    # -- start-up recovery --------------------------------------------------

    def _recover(self) -> None:
        def scan(txn: lmdb.Transaction) -> list[tuple[str, Document, Document | None]]:
            found = []
            for key, _ in self._records.open.items(txn):
                receipt = self._receipts.get(txn, key)
                if receipt is None:
                    raise CorruptRecord(OPEN, key, "marks a receipt that does not exist")
                found.append((receipt["event_id"], receipt, self._deliveries.get(txn, key)))
            return found

        for event_id, receipt, delivery in self._store.read(scan):
            event = receipt["event"]
            if event["cursor"] is not None:
                self._cursor_rule.of(event["channel"]).received(event["cursor"])
            if self._busy(event_id):
                continue  # this inbox restarted; the work is still running
            if receipt["status"] == "processing":
                log.info("resuming event %s (attempt %d so far)", event_id, receipt["attempts"])
                self._resume(event_id, receipt)
            elif delivery is not None and delivery["state"] == "in_flight":
                self._recover_uncertain_delivery(event_id, delivery)
            else:
                self._deliver(event_id)

    def _recover_uncertain_delivery(self, event_id: str, delivery: Document) -> None:
        channel = self._services.channels.get(delivery["channel"])
        if channel is not None and channel.idempotent_delivery:
            log.info("re-sending reply of %s: its outcome is unknown and %s is idempotent", event_id, channel.name)

            def reopen(txn: lmdb.Transaction) -> None:
                key = self._records.key_of(txn, event_id)
                assert key is not None
                document = self._deliveries.get(txn, key)
                assert document is not None
                self._deliveries.put(txn, key, {**document, "state": "pending"})

            self._batch.stage(reopen, lambda _: self._deliver(event_id))
            return
        log.warning(
            "reply of %s was being delivered when the daemon stopped; its outcome is unknown and the channel "
            "cannot re-send safely: marked not resent",
            event_id,
        )

        def mark(txn: lmdb.Transaction) -> Document:
            key = self._records.key_of(txn, event_id)
            assert key is not None
            document = self._deliveries.get(txn, key)
            assert document is not None
            self._deliveries.put(txn, key, {**document, "state": "not_resent", "updated_at": time.time()})
            return self._finish(txn, key, "delivery_uncertain", _NOT_RESENT)

        def after(receipt: Document) -> None:
            self._metrics.deliveries.labels(channel=delivery["channel"], outcome="not_resent").inc()
            self._announce(event_id, receipt)

        self._batch.stage(mark, after)

    # -- reading ------------------------------------------------------------

    def _outcome_of(self, event_id: str, receipt: Document) -> Outcome:
        return Outcome(
            event_id=event_id,
            status=receipt["outcome"] or receipt["status"],
            duplicate=False,
            reply=receipt["reply"],
            actions=actions_from(receipt["actions"]),
            attempts=receipt["attempts"],
            error=last_error(receipt),
        )

    def _outcome(self, event_id: str) -> Outcome | NoSuchEvent:
        found = self._store.read(lambda txn: self._records.find(txn, event_id))
        if found is None:
            return NoSuchEvent(event_id=event_id)
        return self._outcome_of(event_id, found[1])

    def _read_turns(self, message: ReadTurns) -> Turns:
        wanted = message.conversation

        def matches(document: Document) -> bool:
            key = conversation_key(document["channel"], document["conversation"])
            return not wanted or wanted in (key, document["conversation"])

        def turn_of(sequence: int, document: Document) -> Turn:
            return Turn(cursor=sequence, **{**document, "actions": actions_from(document["actions"])})

        def read_oldest(txn: lmdb.Transaction) -> Turns:
            limit = max(0, min(message.limit, MAX_TURNS_PER_READ))
            turns: list[Turn] = []
            cursor = message.since
            for sequence, document in self._turns.iterate_from(txn, message.since):
                if len(turns) >= limit:
                    break
                cursor = sequence
                if matches(document):
                    turns.append(turn_of(sequence, document))
            return Turns(turns=tuple(turns), next_cursor=cursor)

        def read_newest(txn: lmdb.Transaction) -> Turns:
            count = min(message.last, MAX_TURNS_PER_READ)
            newest: list[Turn] = []
            for sequence, document in self._turns.iterate_backwards(txn, down_to=message.since):
                if len(newest) >= count:
                    break
                if matches(document):
                    newest.append(turn_of(sequence, document))
            # Everything up to the log's end has been looked at: read on from there.
            end = max(message.since, self._turns.last_cursor(txn))
            return Turns(turns=tuple(reversed(newest)), next_cursor=end)

        return self._store.read(read_newest if message.last > 0 else read_oldest)
