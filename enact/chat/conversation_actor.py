"""One conversation actor per conversation key: one model turn and its
bounded action loop. Events of one conversation are handled in order; other
conversations run in parallel in their own actors.

The turn's rules are ``enact.chat.conversation`` (``ActionLoop``); the calls
on the conversation's session go through ``enact.chat.session_calls``. This
actor carries out what the rules return: it runs an action through the
command registry (origin ``model-action``) and the step journal, asks the
session, and keeps the markers of the final reply.
"""

from __future__ import annotations

import logging
from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.chat.conversation import ActionLoop, AskModel, Next, Reply, RunAction, chat_command, images_of
from enact.chat.keeping import MarkerKeeper
from enact.chat.markers import split_markers
from enact.chat.metrics import ChatMetrics
from enact.chat.services import ChatServices
from enact.chat.session_calls import SessionCalls
from enact.chat.settings import ChatSettings
from enact.command_journal import JournaledCommands
from enact.commands import CommandCall
from enact.config import RuntimeSettings
from enact.memory.settings import MemorySettings
from enact.messages.common import MODEL_ACTION
from enact.messages.inbox import ActionRecord, ChatEvent, HandleEvent, TurnFailed, TurnFinished
from enact.ownership import ConversationLock
from enact.runtime import RuntimeAuthFailed, RuntimeOverBudget, RuntimeUnavailable
from enact.runtime.advice import owner_advice

log = logging.getLogger(__name__)


class ConversationActor(EnactActor):
    def __init__(self, context: ActorContext, *, services: ChatServices) -> None:
        super().__init__(context)
        self._services = services
        chat, runtime = context.config.typed(ChatSettings), context.config.typed(RuntimeSettings)
        self._max_actions = chat.max_actions
        self._lock = ConversationLock(chat.allowed_conversations, services.origins)
        self._max_held = context.config.typed(MemorySettings).max_pending_per_conversation
        self._sessions = SessionCalls(services.runtime, ask=context.ask, tell=context.tell,
                                      startup_context=services.startup_context,
                                      prompt_version=runtime.prompt_version,
                                      timeout_s=runtime.timeout_s, token=context.fence.token,
                                      metrics=context.metrics, clock=context.clock, hold_records=True)
        self._journal = JournaledCommands(services.commands, self.context.ask)
        self._runtime_failure = ""
        """Why the runtime could not answer during the current event (its reply is then the advice)."""

    def handle(self, message: Any) -> Any:
        match message:
            case HandleEvent():
                return self._handle_event(message)
        return super().handle(message)

    def _handle_event(self, message: HandleEvent) -> None:
        try:
            self._run_event(message)
        finally:
            # After the inbox heard the turn's end: its commit of the reply
            # does not queue behind the mapping's (nothing waits for that).
            self._sessions.tell_records()

    def _run_event(self, message: HandleEvent) -> None:
        self._runtime_failure = ""
        try:
            reply, actions = self._turn(message)
        except Exception as error:  # the inbox counts attempts and retries
            if self.context.supervisor.stopping:
                # Cut short by the stop (a cancelled call, a fenced write):
                # not a failure of the event, which the next start resumes.
                log.info("event %s left unfinished, the daemon is stopping: %s", message.event_id, error)
                return
            log.warning("event %s failed: %s: %s", message.event_id, type(error).__name__, error)
            self.context.tell("inbox", TurnFailed(event_id=message.event_id, error_class=type(error).__name__,
                                                  error=str(error)))
            return
        self.context.tell("inbox", TurnFinished(event_id=message.event_id, reply=reply, actions=tuple(actions),
                                                runtime_failure=self._runtime_failure))

    # -- one turn -------------------------------------------------------------

    def _turn(self, message: HandleEvent) -> tuple[str, list[ActionRecord]]:
        command = chat_command(message.event.text)
        if command is None:
            return self._action_loop(message)
        name, args = command
        if self._services.commands.get(name) is None:
            return f"unknown command /{name}; /help lists them", []
        self._sessions.tell_records()  # a command may call on this session (task.add's brief)
        receipt = self._journal.once(self._call(name, args, origin=message.origin, event=message),
                                     request_id=message.event_id, subject=f"The command /{name}",
                                     resumed=message.attempt > 1)
        return receipt.text, []

    def _call(self, name: str, args: dict[str, Any], *, origin: str, event: HandleEvent,
              receipts: tuple[str, ...] = ()) -> CommandCall:
        return CommandCall(
            name=name,
            args=args,
            origin=origin,
            event_origin=event.origin,
            owners=self._lock.owners(event.event),
            cancel=self.context.fence.token.child(),
            conversation=event.event.conversation_key,
            request_id=event.event_id,
            receipts=receipts,
        )

    def _action_loop(self, message: HandleEvent) -> tuple[str, list[ActionRecord]]:
        # A first attempt has a receipt made just now, so no journaled steps:
        # only a retried or resumed event (attempt 2 on) can have any.
        steps = self._journal.steps(message.event_id) if message.attempt > 1 else []
        loop = ActionLoop(message, steps, max_actions=self._max_actions, owners=self._lock.owners(message.event))
        step: Next = loop.start()
        while True:
            if isinstance(step, AskModel | Reply) and step.count:
                self.context.metrics.of(ChatMetrics).actions.labels(outcome=step.count).inc()
            match step:
                case Reply(final=True):
                    return self._finish_reply(step.text, message, list(loop.receipts())), loop.actions
                case Reply():
                    return step.text, loop.actions
                case AskModel():
                    step = loop.answered(self._ask_model(message.event, step))
                case RunAction():
                    self._sessions.tell_records()  # a command may call on this session (task.add's brief)
                    call = self._call(step.command, step.args, origin=MODEL_ACTION, event=message,
                                      receipts=step.receipts)
                    receipt = self._journal.step(call, request_id=message.event_id, index=step.index)
                    self.context.metrics.of(ChatMetrics).actions.labels(outcome=receipt.outcome.value).inc()
                    step = loop.ran(receipt.text, receipt.ok)

    # -- the runtime, through the conversation's session ------------------------------

    def _ask_model(self, event: ChatEvent, ask: AskModel) -> str:
        """The model's answer; or, when only the owner can fix what failed
        (a login, a missing binary), a reply that says what to do; or, when
        the conversation budget is spent, a notice that says so."""
        at_shell = self._lock.at_owners_shell(event)
        budget = self._services.budget
        overrun = budget.overrun("conversation") if budget is not None and not at_shell else None
        try:
            if overrun is not None:  # said before anything is asked of the session or memory
                raise RuntimeOverBudget(overrun.said())
            return self._sessions.call(event.conversation_key, ask.prompt, owner_message=event.text,
                                       owners=self._lock.owners(event), recall_for=ask.recall_for,
                                       receipt=ask.receipt, images=images_of(event), spends_over_budget=at_shell)
        except RuntimeOverBudget as error:
            self._runtime_failure = f"{type(error).__name__}: {error}"
            return f"Not answered: {error}."
        except (RuntimeAuthFailed, RuntimeUnavailable) as error:
            log.warning("the %s runtime cannot answer (%s): %s", self._services.runtime.name, error.kind, error)
            # The owner reads the advice; the turn's outcome says it failed
            # on the runtime, so a script can tell an outage from an answer.
            self._runtime_failure = f"{type(error).__name__}: {error}"
            return owner_advice(error, adapter=self._services.runtime.name)

    # -- markers in the final reply --------------------------------------------------

    def _finish_reply(self, reply: str, message: HandleEvent, receipts: list[str]) -> str:
        markers = split_markers(reply)
        if not markers.texts:
            return markers.visible
        keeper = MarkerKeeper(ask=self.context.ask, conversation_key=message.event.conversation_key,
                              owners=self._lock.owners(message.event), max_held=self._max_held)
        notice = keeper.keep(markers.texts, event_id=message.event_id, receipts=receipts)
        return f"{markers.visible}\n\n{notice}" if markers.visible else notice
