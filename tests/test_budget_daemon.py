"""Budgets through the daemon's actors with the scripted runtime reporting
tokens: a conversation over budget gets a notice (or is refused) without a
model call while the owner's CLI is always answered; a task that finds its
budget spent pauses and the reset resumes it; a due cron run and an evolve
run skip with the reason recorded; the owner is told once a day per budget;
an idle day calls no model. Time moves on a manual clock (``actor_system``)."""

from __future__ import annotations

import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from actor_system import ActorSystem, running_actors
from task_repos import make_repo

from enact.clock import ManualClock
from enact.messages.budget import Spend
from enact.messages.common import HUMAN_CLI, chat_origin
from enact.messages.curator import EvolveHistory, History
from enact.messages.evolve import GetClock
from enact.messages.inbox import ChatEvent, GetOutcome, Ignored, Outcome, ReadTurns, Receive, Turn
from enact.messages.scheduler import AddSchedule, ListSchedules
from enact.messages.tasks import EventPage, Events, Found, Get, Resume, Resumed, Submit, Submitted
from enact.tasks.records import FailureClass

from conftest import DaemonFactory, wait_for

CHAT = "chat"
ONE_SECOND_TICKS = {"ENACT_DAEMON_WORKERS": "0", "ENACT_SCHEDULER_TICK_S": "1"}
START = datetime(2024, 3, 5, 12, 0).timestamp()
"""Noon, local time: the budget's day (reset 04:00) ends in 16 hours."""


def configure(home: Path, *, budget: dict[str, object], limits: dict[str, int], extra: str = "") -> Path:
    home.mkdir(parents=True, exist_ok=True)
    transcript = home.parent / "transcript.jsonl"
    lines = ["[budget]", 'reset = "04:00"',
             *(f"{key} = {orjson.dumps(value).decode()}" for key, value in budget.items()),
             "[budget.daily_tokens]", *(f"{key} = {value}" for key, value in limits.items()),
             "[scripted]", f'transcript = "{transcript}"', extra]
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "scripted.toml").write_text(
        "[[rule]]\nmatch = 'hello'\nreply = 'hi there'\ninput_tokens = 60\noutput_tokens = 50\n")
    return transcript


def model_calls(transcript: Path) -> int:
    return len(transcript.read_text().splitlines()) if transcript.exists() else 0


def say(system: ActorSystem, text: str, *, message_id: str) -> Outcome | Ignored:
    """``text`` from a chat that is not the owner's CLI; its outcome once replied."""
    event = ChatEvent(channel=CHAT, conversation="friend", message_id=message_id, text=text)
    accepted = system.ask("inbox", Receive(event=event, origin=chat_origin(CHAT)))
    if isinstance(accepted, Ignored):
        return accepted

    def replied() -> Outcome | None:
        outcome = system.ask("inbox", GetOutcome(event_id=event.event_id))
        return outcome if isinstance(outcome, Outcome) and outcome.reply else None

    wait_for(replied, what="the chat's reply")
    found = replied()
    assert found is not None
    return found


def notices(system: ActorSystem) -> list[Turn]:
    return [turn for turn in system.ask("inbox", ReadTurns()).turns if turn.message_id.startswith("notice:")]


def used(system: ActorSystem, purpose: str) -> int:
    return {line.purpose: line.used for line in system.budget.lines()}.get(purpose, 0)


def test_a_conversation_over_budget_gets_a_notice_without_a_model_call_and_the_owners_cli_is_answered(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = configure(home, budget={}, limits={"conversation": 100})
    with running_actors(home, ManualClock(START), ONE_SECOND_TICKS, chats={CHAT: chat_origin(CHAT)}) as system:
        first = say(system, "hello", message_id="1")
        assert isinstance(first, Outcome) and first.reply == "hi there"
        wait_for(lambda: used(system, "conversation") == 110, what="the call tallied")
        second = say(system, "hello again", message_id="2")
        assert isinstance(second, Outcome) and second.reply.startswith(
            "Not answered: today's conversation token budget (100) is spent (110 used); it starts again at 04:00")
        assert second.status == "runtime_failed" and model_calls(transcript) == 1
        owner = system.send("hello from the owner")
        assert owner.reply == "hi there" and model_calls(transcript) == 2  # the owner's CLI spends over budget
        wait_for(lambda: used(system, "conversation") == 220, what="the owner's call counted")
        wait_for(lambda: len(notices(system)) == 1, what="the owner told")
        [notice] = notices(system)
        assert notice.conversation == "cli" and "conversation token budget (100) is spent" in notice.reply
        say(system, "hello once more", message_id="3")
        assert len(notices(system)) == 1  # one notice a day, not one per refusal

        system.clock.advance(16 * 3600)  # past 04:00: the budget's day starts again
        again = say(system, "hello, new day", message_id="4")
        assert isinstance(again, Outcome) and again.reply == "hi there" and model_calls(transcript) == 3


def test_refuse_ignores_a_chat_over_budget_and_still_answers_the_owners_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = configure(home, budget={"conversation": "refuse"}, limits={"total": 100})
    with running_actors(home, ManualClock(START), ONE_SECOND_TICKS, chats={CHAT: chat_origin(CHAT)}) as system:
        assert system.send("hello").reply == "hi there"  # the owner's: counted in the total, never refused
        wait_for(lambda: used(system, "total") == 110, what="the call tallied")
        refused = say(system, "hello", message_id="1")
        assert isinstance(refused, Ignored) and refused.reason.startswith(
            "refused: today's total token budget (100) is spent")
        assert system.send("hello").reply == "hi there" and model_calls(transcript) == 2
        wait_for(lambda: [n.reply for n in notices(system)] != [], what="the owner told")
        assert ["total token budget (100) is spent" in n.reply for n in notices(system)] == [True]


def test_a_spent_budget_skips_a_due_cron_run_and_the_evolve_runs_scan_with_the_reason_kept(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", doctor=None)
    transcript = configure(home, budget={}, limits={"task": 50, "scan": 50},
                           extra='[evolve]\nschedule = "every 2s"\n[tasks]\n')
    (home / "scripted.toml").write_text(
        "[[rule]]\nmatch = 'hello'\nreply = 'hi'\ninput_tokens = 60\n"
        "[[rule]]\npurpose = 'task'\nmatch = '.'\nreply = 'done'\ninput_tokens = 60\n")
    with running_actors(home, ManualClock(START), ONE_SECOND_TICKS) as system:
        # The task and scan budgets spent by hand: the ledger as a day of work would leave it.
        system.supervisor.tell("budget", Spend(purpose="task", tokens=60))
        system.supervisor.tell("budget", Spend(purpose="scan", tokens=60))
        wait_for(lambda: used(system, "task") == used(system, "scan") == 60, what="the spending kept")
        added = system.ask("scheduler", AddSchedule(spec="every 10s", request="tidy up", repo=str(repo)))
        schedule_id = added.schedule.id  # type: ignore[union-attr]
        for _ in range(12):
            system.clock.advance(1)
            system.ask("scheduler", ListSchedules())
        wait_for(lambda: entry(system, schedule_id)["skipped_for_budget"] == 1, what="the cron run skipped")
        skipped = entry(system, schedule_id)
        assert skipped["last_task"] is None and "task token budget (50) is spent" in skipped["budget_skip"]
        wait_for(lambda: any(e.kind == "skipped-budget" for e in history(system)), what="the evolve skip kept")
        detail = next(e.detail for e in history(system) if e.kind == "skipped-budget")
        assert "scan skipped for budget: today's scan token budget (50) is spent" in detail
        assert "scan skipped for budget" in system.ask("evolve", GetClock()).last_outcome
        assert model_calls(transcript) == 0
        told = sorted(n.message_id for n in notices(system))
        assert len(told) == 2  # one per spent budget (task, scan), however many runs skipped
        for _ in range(4):
            system.clock.advance(1)
        assert len(notices(system)) == 2


def entry(system: ActorSystem, schedule_id: int) -> dict[str, Any]:
    [found] = [e.schedule for e in system.ask("scheduler", ListSchedules()).schedules if e.schedule.id == schedule_id]
    return {"skipped_for_budget": found.skipped_for_budget, "budget_skip": found.budget_skip,
            "last_task": found.last_task}


def history(system: ActorSystem) -> list[Any]:
    found = system.ask("curator", History(limit=50))
    assert isinstance(found, EvolveHistory)
    return list(found.events)


def test_an_idle_day_calls_no_model_and_the_budget_day_rolls_at_the_reset(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = configure(home, budget={}, limits={"conversation": 100, "scan": 100, "total": 1000},
                           extra='[evolve]\nschedule = "every 1h"\n')
    start = datetime(2024, 3, 5, 3, 0)
    clock = ManualClock(start.timestamp())
    with running_actors(home, clock, {"ENACT_DAEMON_WORKERS": "0", "ENACT_SCHEDULER_TICK_S": "60"}) as system:
        assert system.send("hello").reply == "hi there"  # spent before the reset at 04:00
        wait_for(lambda: used(system, "total") == 110, what="the call tallied")
        calls = model_calls(transcript)
        for _ in range(24 * 12):  # a day, five minutes at a time, each tick handled before the next step
            clock.advance(300)
            system.ask("evolve", GetClock())
            system.ask("scheduler", ListSchedules())
        assert model_calls(transcript) == calls
        assert used(system, "total") == 0 and system.budget.resets_at() == (
            start + timedelta(days=1, hours=1)).timestamp()
        shown = system.ask("evolve", GetClock())
        assert shown.last_outcome == "co-evolve: nothing new, no model called"


def test_the_days_use_survives_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home, budget={}, limits={"conversation": 100})
    clock = ManualClock(START)
    with running_actors(home, clock, ONE_SECOND_TICKS) as system:
        system.send("hello")
        wait_for(lambda: used(system, "conversation") == 110, what="the call tallied")
    with running_actors(home, clock, ONE_SECOND_TICKS, chats={CHAT: chat_origin(CHAT)}) as again:
        assert used(again, "conversation") == 110
        refused = say(again, "hello", message_id="1")
        assert isinstance(refused, Outcome) and refused.reply.startswith("Not answered")
        assert len(notices(again)) == 1  # told before the restart; not again


def task(system: ActorSystem, task_id: int) -> Any:
    found = system.ask("tasks", Get(task_id=task_id))
    assert isinstance(found, Found), found
    return found.task


def test_a_task_that_finds_its_budget_spent_pauses_and_the_reset_or_its_owner_resumes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", doctor=None)
    transcript = configure(home, budget={}, limits={"task": 100})
    (home / "scripted.toml").write_text("[[rule]]\npurpose = 'task'\nmatch = '.'\nreply = 'done'\ninput_tokens = 150\n")
    with running_actors(home, ManualClock(START), {"ENACT_DAEMON_WORKERS": "1"}) as system:
        def submit(text: str) -> int:
            submitted = system.ask("tasks", Submit(request=text, repo=str(repo), origin=HUMAN_CLI))
            assert isinstance(submitted, Submitted), submitted
            return submitted.task.id

        def settled(task_id: int) -> Any:
            wait_for(lambda: task(system, task_id).state.value in ("succeeded", "failed", "paused"),
                     timeout=60, what=f"task {task_id} to settle")
            return task(system, task_id)

        first = settled(submit("first"))
        assert first.state.value != "paused" and model_calls(transcript) == 1  # it crossed the budget
        wait_for(lambda: used(system, "task") == 150, what="the task's call tallied")
        second = settled(submit("second"))
        assert (second.state.value, second.failure_class) == ("paused", FailureClass.BUDGET)
        assert "paused for budget: today's task token budget (100) is spent" in second.summary
        assert model_calls(transcript) == 1  # not called: nothing was sent to the model

        resumed = system.ask("tasks", Resume(task_id=second.id, origin=HUMAN_CLI))  # by hand: paused again
        assert isinstance(resumed, Resumed)
        wait_for(lambda: task(system, second.id).attempt > second.attempt
                 and task(system, second.id).state.value == "paused", timeout=60, what="paused again")
        assert model_calls(transcript) == 1

        system.clock.advance(16 * 3600)  # past 04:00: the reset queues it again, and it runs
        wait_for(lambda: settled(second.id).state.value != "paused", timeout=60, what="the reset's resume")
        after = settled(second.id)
        assert after.state.value != "paused" and model_calls(transcript) == 2
        page = system.ask("tasks", Events(task_id=second.id))
        assert isinstance(page, EventPage)
        assert "resumed: the task budget's day started again" in [e.event.summary for e in page.events]


def test_status_and_the_gauge_show_use_against_budget_and_a_kill_9_keeps_the_days_use(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    configure(home, budget={}, limits={"conversation": 100, "total": 1000})
    daemon = daemons.start(home)
    sent = daemon.cli_json("send", "--json", "hello")
    assert sent["reply"] == "hi there"

    def lines() -> dict[str, dict[str, Any]]:
        status: dict[str, Any] = daemon.cli_json("status", "--json")
        return {line["purpose"]: line for line in status["budget"]}

    wait_for(lambda: lines()["conversation"]["used"] == 110, what="the call tallied")
    assert lines()["conversation"] == {"purpose": "conversation", "used": 110, "limit": 100, "remaining": 0}
    assert lines()["total"] == {"purpose": "total", "used": 110, "limit": 1000, "remaining": 890}
    text = daemon.cli("status").stdout
    assert "conversation   110 of 100 tokens, spent" in text and "total          110 of 1000 tokens, 890 left" in text
    metrics_addr = daemon.cli_json("status", "--json")["metrics_addr"]
    with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=10) as response:
        scraped = response.read().decode()
    assert 'enact_budget_remaining_tokens{purpose="conversation"} 0.0' in scraped
    assert 'enact_budget_remaining_tokens{purpose="total"} 890.0' in scraped

    daemon.kill9()
    daemon = daemons.start(home)
    assert lines()["conversation"]["used"] == 110  # the day's use is committed with each call's tally
