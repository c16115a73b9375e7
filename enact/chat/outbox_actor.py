"""The outbox: delivers committed replies through their channels, at most
once where a channel cannot promise more, with retries.

A repeated attempt is journaled ``in_flight`` (with this daemon's fence
generation) before its channel is called, and the channel's answer is
journaled before anyone hears of it. A first attempt, the common case, costs
no commit here: the inbox's commit of the reply marks it in flight, and, if
it succeeds, the inbox's commit of the completed receipt records that. The
state machine is ``enact.chat.deliveries``; a reply longer than its
channel takes goes out as numbered parts (``enact.chat.parts``), each part
journaled in flight before it is sent, so a crash between parts loses
neither the parts sent nor the parts still to send.

The outbox acts only on ``Deliver`` and answers only the actor that told it,
once the delivery is finished (the inbox tells it only once it can be
addressed, see ``InboxActor.on_receive``). Each channel is called on a small
thread pool of its own, so a slow channel never blocks the outbox nor
another channel.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import WriteBatch
from enact.channels import Channel, DeliveryReport, OutgoingReply, delivers_at_once
from enact.chat import deliveries
from enact.chat.deliveries import Step
from enact.chat.metrics import ChatMetrics
from enact.chat.parts import split_reply
from enact.chat.settings import ChatSettings
from enact.messages.inbox import Delivered
from enact.messages.outbox import ChannelAnswered, Deliver, DeliveryRecord, DeliveryState, RetryDelivery
from enact.metrics import Children
from enact.retry import Backoff
from enact.storage import AppendLog, RecordTable

log = logging.getLogger(__name__)

DELIVERIES = "inbox.deliveries"
"""Keyed by the receipt's number, as the inbox keys its receipts (the name
predates the outbox; the records are the same)."""
DATABASES = (DELIVERIES,)
CALLS_PER_CHANNEL = 4


def deliver_at_once(channel: Channel | None, reply: OutgoingReply) -> bool:
    """Deliver a reply's first attempt there and then, in the caller's
    thread, if its channel takes replies so (``delivers_at_once``: nothing
    outside the daemon is done, so no journal and no fence check is owed)
    in one part; whether it did. The inbox calls it as a turn ends: its
    commit of the reply then completes the event too."""
    if channel is None or not delivers_at_once(channel):
        return False
    if len(split_reply(reply.text, channel.max_message_length)) != 1:
        return False
    try:
        return channel.deliver(reply).ok
    except Exception:  # not as promised: the outbox calls it again and journals what happens
        log.exception("the %s channel failed to deliver at once", reply.channel)
        return False


class OutboxActor(EnactActor):
    def __init__(self, context: ActorContext, *, channels: Mapping[str, Channel]) -> None:
        super().__init__(context)
        self._channels = channels
        self._store = store = context.own_store()
        self.batch = self._batch = WriteBatch(store, owner=context.name)
        self._journal = RecordTable(store.table(DELIVERIES), DeliveryRecord)
        chat = context.config.typed(ChatSettings)
        self._policy = Backoff(first_s=chat.delivery_backoff_s, factor=2.0, attempts=chat.delivery_attempts)
        self._metrics = context.metrics
        self._deliveries = Children(context.metrics.of(ChatMetrics).deliveries)
        self._pools: dict[str, ThreadPoolExecutor] = {}

    def on_stop(self) -> None:
        super().on_stop()
        # Restarted (not stopping): calls and back-offs already under way
        # still answer, to the next incarnation, which finds them journaled.
        # Stopping: what has not begun is left to the next daemon.
        stopping = self.context.supervisor.stopping
        if stopping:
            self.cancel_timers()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=stopping)

    def handle(self, message: Any) -> Any:
        match message:
            case Deliver():
                return self._deliver(message)
            case RetryDelivery():
                return self._retry(message)
            case ChannelAnswered():
                return self._answered(message)
        return super().handle(message)

    # -- attempts -----------------------------------------------------------

    def _deliver(self, message: Deliver) -> None:
        key = AppendLog.key(message.sequence)
        generation = self.context.fence.generation
        channel = self._channels.get(message.channel)
        idempotent = channel is not None and channel.idempotent_delivery
        parts = len(self._parts(channel, message.text))
        unsent = deliveries.new_record(channel=message.channel, conversation=message.conversation,
                                       message_id=message.message_id, text=message.text, parts=parts,
                                       generation=generation, now=self.context.clock.time())
        if message.first:
            # The common case, without a commit of its own: the reply's commit
            # marks this attempt, and no other can be running.
            self._call(message.event_id, message.sequence, message.reply_to, unsent, first=True)
            return

        def write(txn: lmdb.Transaction) -> tuple[Step, DeliveryRecord | None]:
            record = self._journal.get(txn, key)
            step = deliveries.on_deliver(record, first=False, replied_by=message.replied_by,
                                         generation=generation, idempotent=idempotent)
            if step is Step.SEND:
                record = deliveries.next_attempt(record or unsent, generation=generation, now=self.context.clock.time())
            elif step is Step.GIVE_UP:
                record = deliveries.given_up(record or unsent, generation=generation, now=self.context.clock.time())
            else:
                return step, record
            self._journal.put(txn, key, record)
            return step, record

        def after(result: tuple[Step, DeliveryRecord | None]) -> None:
            step, record = result
            if record is None or step is Step.WAIT:
                return
            if step is Step.SEND:
                log.info("re-sending the reply of %s (attempt %d)", message.event_id, record.attempts)
                self._call(message.event_id, message.sequence, message.reply_to, record)
                return
            if step is Step.GIVE_UP:
                unsure = record.unsure_parts[-1] + 1
                log.warning("reply of %s (part %d of %d) was being delivered when the daemon stopped; its outcome "
                            "is unknown and the channel cannot re-send safely: marked not resent", message.event_id,
                            unsure, record.parts)
                self._deliveries(record.channel, "not_resent").inc()
                if deliveries.sends_next_part(record):
                    self._call(message.event_id, message.sequence, message.reply_to, record)
                    return
            self._report(message.event_id, message.reply_to, record)

        # A fenced daemon fails inside the transaction: no channel call follows.
        self._batch.stage(write, after)

    def _retry(self, message: RetryDelivery) -> None:
        key = AppendLog.key(message.sequence)
        generation = self.context.fence.generation

        def write(txn: lmdb.Transaction) -> DeliveryRecord | None:
            record = self._journal.get(txn, key)
            if record is None or not deliveries.retry_due(record):
                return None
            record = deliveries.next_attempt(record, generation=generation, now=self.context.clock.time())
            self._journal.put(txn, key, record)
            return record

        def after(record: DeliveryRecord | None) -> None:
            if record is not None:
                self._call(message.event_id, message.sequence, message.reply_to, record)

        self._batch.stage(write, after)

    def _call(self, event_id: str, sequence: int, reply_to: str, record: DeliveryRecord, *,
              first: bool = False) -> None:
        """Send ``record``'s part; ``first``: the reply's first attempt, which nothing journaled."""
        channel = self._channels.get(record.channel)
        parts = self._parts(channel, record.text)
        if channel is None or len(parts) != record.parts:
            error = "unknown channel" if channel is None else "the channel's message limit changed since the " \
                "reply was split into parts"
            self._answered(ChannelAnswered(event_id=event_id, sequence=sequence, reply_to=reply_to, attempt=record,
                                           ok=False, retryable=False, error=error))
            return
        reply = OutgoingReply(event_id=event_id, channel=record.channel, conversation=record.conversation,
                              message_id=record.message_id, text=parts[record.part], attempt=record.attempts,
                              part=record.part, parts=record.parts, repeat=deliveries.repeats(record))
        if delivers_at_once(channel):
            self._answered(self._channel_answer(channel, reply, sequence, reply_to, record), unjournaled=first)
            return
        pool = self._pools.get(record.channel)
        if pool is None:
            pool = self._pools[record.channel] = ThreadPoolExecutor(
                max_workers=CALLS_PER_CHANNEL, thread_name_prefix=f"enact-deliver-{record.channel}")
        pool.submit(self._call_channel, channel, reply, sequence, reply_to, record)

    @staticmethod
    def _parts(channel: Channel | None, text: str) -> list[str]:
        """The messages a reply goes out as, through ``channel``."""
        return split_reply(text, channel.max_message_length if channel is not None else 0)

    def _call_channel(self, channel: Channel, reply: OutgoingReply, sequence: int, reply_to: str,
                      attempt: DeliveryRecord) -> None:
        """Runs on the channel's delivery thread."""
        answer = self._channel_answer(channel, reply, sequence, reply_to, attempt)
        try:
            self.context.tell(self.context.name, answer)
        except Exception:
            log.warning("delivery result of %s arrived while the daemon stops", reply.event_id)

    def _channel_answer(self, channel: Channel, reply: OutgoingReply, sequence: int, reply_to: str,
                        attempt: DeliveryRecord) -> ChannelAnswered:
        try:
            if not delivers_at_once(channel):  # which does nothing outside LMDB: the fence has nothing to keep out
                self.context.fence.check()
            report = channel.deliver(reply)
        except Exception as problem:
            report = DeliveryReport(ok=False, retryable=True, error=f"{type(problem).__name__}: {problem}")
        return ChannelAnswered(event_id=reply.event_id, sequence=sequence, reply_to=reply_to, attempt=attempt,
                               ok=report.ok, retryable=report.retryable, error=report.error,
                               retry_after_s=report.retry_after_s,
                               unsure=report.unsure and not channel.idempotent_delivery)

    # -- answers ------------------------------------------------------------

    def _answered(self, message: ChannelAnswered, *, unjournaled: bool = False) -> None:
        """``unjournaled``: the answer to a first attempt, in the same message
        as the ``Deliver`` that made it: nothing journaled it since."""
        key = AppendLog.key(message.sequence)
        stored = None if unjournaled else self._store.read(lambda txn: self._journal.get(txn, key))
        if not deliveries.answers(stored, message.attempt):
            return  # stale: not the attempt in flight
        record = deliveries.answered(message.attempt, ok=message.ok, retryable=message.retryable,
                                     error=message.error, policy=self._policy, now=self.context.clock.time(),
                                     unsure=message.unsure)
        retrying = record.state is DeliveryState.RETRYABLE_FAILURE
        if message.unsure and message.attempt.part in record.unsure_parts:
            log.warning("reply of %s (part %d of %d): the connection broke after it was sent, also when it was "
                        "sent again marked as a possible repeat; its outcome is unknown: not sent a third time",
                        message.event_id, message.attempt.part + 1, record.parts)
            self._deliveries(record.channel, "not_resent").inc()
        elif not deliveries.sends_next_part(record):  # a reply in parts counts once, when its last is sent
            outcome = "ok" if message.ok else "retry" if retrying else "failed"
            self._deliveries(record.channel, outcome).inc()
        if deliveries.recorded_by_the_inbox(stored, record):
            self._report(message.event_id, message.reply_to, record)
            return

        def after(_: None) -> None:
            if deliveries.sends_next_part(record):
                self._call(message.event_id, message.sequence, message.reply_to, record)
                return
            if not retrying:
                self._report(message.event_id, message.reply_to, record)
                return
            delay = deliveries.retry_delay(self._policy, record.attempts, message.retry_after_s)
            repeat = " (its answer was lost: sent again marked as a possible repeat)" if message.unsure else ""
            log.warning("delivery of %s failed (attempt %d): %s; trying again in %g s%s", message.event_id,
                        record.attempts, message.error, delay, repeat)
            retry = RetryDelivery(event_id=message.event_id, sequence=message.sequence, reply_to=message.reply_to)
            self.tell_later(delay, retry)

        self._batch.stage(lambda txn: self._journal.put(txn, key, record), after)

    def _report(self, event_id: str, reply_to: str, record: DeliveryRecord) -> None:
        outcome = record.outcome
        if outcome is None:
            raise ValueError(f"the delivery of {event_id} is not finished: {record.state}")
        self.context.tell(reply_to, Delivered(event_id=event_id, outcome=outcome, error=record.error))
