"""The inbox actor: a thin front over ``enact.chat.inbox``.

It answers the channels and its conversations, and carries out what the
inbox's rules return once their writes are committed: the conversation
actors (a keyed pool it keeps), the outbox, the channels' cursors and
outcomes, the ``TurnLogged`` feed, retries on its own timer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from enact.actors._asks import ActorNotFound
from enact.actors._base import STARTED, ActorContext, EnactActor
from enact.actors.supervisor import ActorSpec
from enact.budget.settings import REFUSE
from enact.chat.conversation_actor import ConversationActor
from enact.chat.inbox import Inbox
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
from enact.chat.metrics import ChatMetrics
from enact.chat.outbox_actor import deliver_at_once
from enact.chat.services import ChatServices
from enact.chat.settings import ChatSettings
from enact.messages.inbox import (
    ChatEvent,
    Delivered,
    GetCursor,
    GetOutcome,
    NoticeTaken,
    Notify,
    ReadTurns,
    Receive,
    RedactTurns,
    Retry,
    TurnFailed,
    TurnFinished,
)
from enact.messages.sessions import AddNote
from enact.metrics import Children
from enact.ownership import ConversationLock
from enact.retry import Backoff

log = logging.getLogger(__name__)

_RETRY_FIRST_S = 0.2


CONVERSATIONS = "conversation"
"""The family of the conversation actors, a keyed pool the inbox keeps."""


def conversation_actor_name(conversation_key: str) -> str:
    return f"{CONVERSATIONS}:{conversation_key}"


def refused_for_budget(services: ChatServices, lock: ConversationLock) -> Callable[[ChatEvent], str | None] | None:
    """With ``budget.conversation = "refuse"``: why an event is refused while
    the conversation budget is spent (the owner's CLI never is)."""
    budget = services.budget
    if budget is None or budget.settings.conversation != REFUSE:
        return None

    def refused(event: ChatEvent) -> str | None:
        if lock.at_owners_shell(event):
            return None
        overrun = budget.overrun("conversation")
        return None if overrun is None else f"refused: {overrun.said()}"

    return refused


class InboxActor(EnactActor):
    def __init__(self, context: ActorContext, *, services: ChatServices) -> None:
        super().__init__(context)
        self._services = services
        chat = context.config.typed(ChatSettings)
        # The conversation actors, and which events they hold: kept by the
        # supervisor, so a restarted inbox sees the work still running.
        self._conversations = context.supervisor.pool(
            CONVERSATIONS, self._conversation_spec, idle_s=chat.conversation_idle_s
        )
        self.inbox = Inbox(
            context.own_store(), name=context.name, generation=context.fence.generation,
            channels=services.channels.keys(),
            lock=ConversationLock(chat.allowed_conversations, services.origins),
            attempts=Backoff(first_s=_RETRY_FIRST_S, factor=2.0, attempts=chat.max_attempts),
            running=self._conversations.running,
            refused_for_budget=refused_for_budget(services, ConversationLock(chat.allowed_conversations,
                                                                             services.origins)),
            deliver_at_once=lambda reply: deliver_at_once(services.channels.get(reply.channel), reply),
        )
        self.batch = self.inbox.batch
        chat_metrics = context.metrics.of(ChatMetrics)
        self._inbox_events = Children(chat_metrics.inbox_events)
        self._deliveries = Children(chat_metrics.deliveries)
        inbox = self.inbox
        self.idle_reads.declare(GetOutcome, lambda message: inbox.committed_outcome(message.event_id))
        self.idle_reads.declare(ReadTurns, inbox.committed_turns)
        self.idle_reads.declare(GetCursor, lambda message: inbox.committed_cursor(message.channel))

    def _conversation_spec(self, conversation: str) -> ActorSpec:
        return ActorSpec(name=conversation_actor_name(conversation), actor=ConversationActor,
                         options={"services": self._services})

    # -- life cycle ---------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        try:
            if message is STARTED:
                # Recovery runs here, not in on_start: the supervisor asks this
                # once it can address this actor by name (and waits for it), so
                # the answers to what recovery tells others find this actor.
                self.inbox.recover()
                self.inbox.batch.flush()
            return super().on_receive(message)  # which commits, once the mailbox is empty
        finally:
            self._carry_out(self.inbox.take_effects())

    def on_stop(self) -> None:
        super().on_stop()
        self._carry_out(self.inbox.take_effects())
        self.cancel_timers()

    # -- messages -----------------------------------------------------------

    def handle(self, message: Any) -> Any:
        inbox = self.inbox
        match message:
            case Receive():
                return inbox.receive(message, self.context.clock.time())
            case TurnFinished():
                return inbox.turn_finished(message, self.context.clock.time())
            case TurnFailed():
                return inbox.turn_failed(message)
            case Retry():
                return inbox.retry(message.event_id)
            case Delivered():
                return inbox.delivered(message, self.context.clock.time())
            case GetOutcome():
                return inbox.outcome(message.event_id)
            case ReadTurns():
                return inbox.turns(message)
            case Notify():
                return inbox.notify(message, self.context.clock.time())
            case GetCursor():
                return inbox.cursor(message.channel)
            case RedactTurns():
                return inbox.redact(message)
        return super().handle(message)

    def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            # One effect's failure must not cost the others theirs: its write
            # is committed, and what it left undone is resumed (a redelivery,
            # a retry, the next start), as a failed callback's was.
            try:
                self._carry_out_one(effect)
            except Exception:
                log.exception("%s: carrying out %s after a committed write failed", self.context.name,
                              type(effect).__name__)
                self.context.metrics.callback_errors.labels(actor=self.context.slot.family).inc()

    def _carry_out_one(self, effect: Effect) -> None:
        match effect:
            case Count(channel=channel, outcome=outcome):
                self._inbox_events(channel, outcome).inc()
            case CountDelivery(channel=channel):
                self._deliveries(channel, "ok").inc()
            case ToConversation(key=key, work=work, message=handed):
                self._conversations.tell(key, work, handed)
            case ConversationDone(work=work):
                self._conversations.done(work)
            case Later(delay_s=delay_s, message=later):
                self.tell_later(delay_s, later)
            case Tell(actor=actor, message=NoticeTaken() as taken):
                try:
                    self.context.tell(actor, taken)
                except ActorNotFound:  # restarting: it tells the notice again, which finds it taken
                    log.info("notice %s: %s is not running to hear it was taken", taken.notice_id, actor)
            case Tell(actor=actor, message=AddNote() as note):
                try:
                    self.context.tell(actor, note)
                except ActorNotFound:  # restarting: the notice, not acknowledged, is told again
                    log.info("notice %s: %s is not running to keep its note", note.note_id, actor)
            case Tell(actor=actor, message=told):
                self.context.tell(actor, told)
            case Acknowledge(channel=channel, cursor=cursor):
                self._services.channels[channel].acknowledge(cursor)
            case Finished(channel=channel, outcome=finished):
                self._services.channels[channel].finished(finished)
            case Publish(event=event):
                self.context.publish(event)
