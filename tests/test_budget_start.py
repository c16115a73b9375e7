"""The budget across a daemon's start: today's use is in the gate before any
actor starts (the inbox, which starts first, resumes an unfinished chat
whose call reads it), and tasks the budget paused are queued again at the
start when the day's reset passed while no daemon ran. Time moves on a
manual clock (``actor_system``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from actor_system import NO_WORKERS, running_actors
from task_repos import make_repo
from test_budget_daemon import CHAT, START, configure, model_calls, task, used

from enact import components
from enact.actors._base import ActorContext, EnactActor
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.budget.component import BudgetComponent
from enact.budget.gate import BudgetGate
from enact.budget.settings import BudgetSettings
from enact.chat.inbox import Inbox
from enact.chat.inbox_records import DATABASES as INBOX_DATABASES
from enact.clock import ManualClock
from enact.components import DaemonParts
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages.common import HUMAN_CLI, chat_origin
from enact.messages.inbox import ChatEvent, GetOutcome, Outcome, Receive
from enact.messages.tasks import Submit, Submitted
from enact.metrics import Metrics
from enact.ownership import ConversationLock
from enact.retry import Backoff
from enact.storage import Storage
from enact.tasks.records import FailureClass

from conftest import wait_for


def spend_the_conversation_budget(home: Path, clock: ManualClock) -> Path:
    """A home whose conversation budget (100) the owner's CLI spent today (110); its transcript."""
    transcript = configure(home, budget={}, limits={"conversation": 100})
    with running_actors(home, clock) as system:
        system.send("hello")  # the owner's CLI: answered, and the budget is spent by it
        wait_for(lambda: used(system, "conversation") == 110, what="the call tallied")
    return transcript


class GateReader(EnactActor):
    """Reads the gate as it is made: what an actor starting before the budget actor would find."""

    def __init__(self, context: ActorContext, *, gate: BudgetGate, seen: list[Any]) -> None:
        super().__init__(context)
        seen.append({line.purpose: line.used for line in gate.lines()})


def test_the_gate_holds_the_days_use_before_the_first_actor_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = ManualClock(START)
    spend_the_conversation_budget(home, clock)
    settings = components.load().load_config(home, environ=NO_WORKERS)
    gate = BudgetGate(settings.typed(BudgetSettings), clock)
    parts = DaemonParts(settings=settings, runtime=None, channels={}, origins={}, commands=None,  # type: ignore[arg-type]
                        budget=gate)
    [budget] = BudgetComponent().actors(parts)
    seen: list[Any] = []
    # The reader first, the budget actor after it (alone here: what it tells at start has no one to hear it).
    specs = [ActorSpec(name="reader", actor=GateReader, options={"gate": gate, "seen": seen}),
             dataclasses.replace(budget, depends_on=("reader",))]
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    supervisor = Supervisor(specs, home=home, config=settings, metrics=Metrics(), storage=storage, fence=fence,
                            on_fatal=lambda _: None, clock=clock)
    try:
        supervisor.start()
        assert seen == [{"conversation": 110, "total": 110}]
    finally:
        supervisor.stop(5)
        fence.release()
        storage.close()


def leave_unfinished(home: Path, event: ChatEvent) -> None:
    """``event`` received and handed to its conversation, which never
    answered: what a daemon killed mid-call leaves for the next to resume."""
    storage = Storage(home / STATE_DIR)
    try:
        origins = {"local": HUMAN_CLI, CHAT: chat_origin(CHAT)}
        inbox = Inbox(storage.grant("inbox", INBOX_DATABASES), name="inbox", generation=1,
                      channels=tuple(origins), lock=ConversationLock((), origins),
                      attempts=Backoff(first_s=0.2, factor=2.0, attempts=3), running=lambda _: False)
        inbox.receive(Receive(event=event, origin=chat_origin(CHAT)), START)
        inbox.commit()
    finally:
        storage.close()


def test_an_unfinished_chat_resumed_at_start_finds_the_days_use_already_in_the_gate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    clock = ManualClock(START)
    transcript = spend_the_conversation_budget(home, clock)
    calls = model_calls(transcript)
    left = ChatEvent(channel=CHAT, conversation="friend", message_id="left", text="hello")
    leave_unfinished(home, left)

    with running_actors(home, clock, chats={CHAT: chat_origin(CHAT)}) as again:
        def answered() -> Outcome | None:
            outcome = again.ask("inbox", GetOutcome(event_id=left.event_id))
            return outcome if isinstance(outcome, Outcome) and outcome.reply else None

        wait_for(answered, what="the resumed chat's answer")
        outcome = answered()
        assert outcome is not None and outcome.reply.startswith("Not answered"), outcome
        assert model_calls(transcript) == calls  # the resumed chat made no model call


def test_tasks_paused_for_budget_are_queued_again_at_start_when_the_reset_passed_while_no_daemon_ran(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", doctor=None)
    transcript = configure(home, budget={}, limits={"task": 100})
    (home / "scripted.toml").write_text("[[rule]]\npurpose = 'task'\nmatch = '.'\nreply = 'done'\ninput_tokens = 150\n")
    clock = ManualClock(START)
    workers = {"ENACT_DAEMON_WORKERS": "1"}
    with running_actors(home, clock, workers) as system:
        ids = []
        for text in ("first", "second"):
            submitted = system.ask("tasks", Submit(request=text, repo=str(repo), origin=HUMAN_CLI))
            assert isinstance(submitted, Submitted), submitted
            ids.append(submitted.task.id)
            wait_for(lambda: task(system, ids[-1]).state.value in ("succeeded", "failed", "paused"), timeout=60,
                     what=f"task {ids[-1]} to settle")
        paused = task(system, ids[1])
        assert (paused.state.value, paused.failure_class) == ("paused", FailureClass.BUDGET)
    clock.advance(16 * 3600)  # past 04:00, with no daemon running

    with running_actors(home, clock, workers) as again:
        wait_for(lambda: task(again, ids[1]).state.value in ("succeeded", "failed"), timeout=60,
                 what="the paused task queued again and run")
        assert model_calls(transcript) == 2 and used(again, "task") == 150  # today's, not yesterday's
