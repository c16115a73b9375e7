"""Cron and the backlog: a due schedule submits its task (never while the
previous one is unfinished), a fenced daemon submits nothing, runs missed
while no daemon ran coalesce, backlog items are promoted by hand or when
the queue is idle. The schedule's clock is driven by hand in the daemon's
actors in this process (``actor_system``); the CLI and chat paths run a
real daemon."""

from __future__ import annotations

import logging
import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from actor_system import NO_WORKERS, ActorSystem, running_actors
from git_repos import make_repo
from home_state import rewrite_record, snapshot
from schedule_clock import FAST_TICKS, taken_over

from enact.claimed_clock import ClaimState
from enact.clock import ManualClock
from enact.messages.common import HUMAN_CLI, RefusalCode, Refused
from enact.messages.scheduler import AddSchedule, ListSchedules, RemoveSchedule, ScheduleAdded, ScheduleRemoved
from enact.messages.tasks import Cancel, CancelAccepted, List
from enact.tasks.records import Task
from enact.tasks.scheduler_actor import DATABASES, SCHEDULES
from enact.tasks.scheduling import Schedule

from conftest import DaemonFactory, wait_for

TICK = {**NO_WORKERS, "ENACT_SCHEDULER_TICK_S": "1"}
"""One scheduler tick a second of the manual clock: tests advance it a second at a time."""


def planted(home: Path, schedule_id: int, change: Callable[[Schedule], Schedule]) -> Schedule:
    """Rewrite a stopped daemon's stored schedule as ``change`` says; the schedule as it was."""
    return rewrite_record(home, "scheduler", DATABASES, SCHEDULES, Schedule, schedule_id, change)


def tasks_of(daemon: Any) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = daemon.cli_json("task", "list", "--limit", "100", "--json")
    return sorted(listed, key=lambda task: task["id"])


def tasks_in(system: ActorSystem) -> list[Task]:
    return sorted(system.ask("tasks", List(limit=100)).tasks, key=lambda task: task.id)


def schedule_in(system: ActorSystem) -> Schedule:
    [entry] = system.ask("scheduler", ListSchedules()).schedules
    return entry.schedule


def tick(system: ActorSystem, seconds: int = 1) -> None:
    """Move time on a second at a time, each tick handled before the next:
    a timer's message is told, and the ask after it is answered after it."""
    for _ in range(seconds):
        system.clock.advance(1)
        system.ask("scheduler", ListSchedules())


def test_a_due_schedule_submits_its_task_and_nothing_while_that_task_is_unfinished(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    clock = ManualClock()
    with running_actors(tmp_path / "home", clock, TICK) as system:
        added = system.ask("scheduler", AddSchedule(spec="every 2s", request="tidy the notes", repo=str(repo)))
        assert isinstance(added, ScheduleAdded) and added.next_due == clock.time() + 2
        tick(system)
        assert tasks_in(system) == []  # not due yet
        tick(system)
        [first] = tasks_in(system)
        assert first.origin == "scheduler" and first.idempotency_key == f"cron:1:{int(added.next_due)}"
        assert schedule_in(system).last_task == first.id
        tick(system, 4)  # two due times while the first task is queued: skipped
        assert tasks_in(system) == [first] and schedule_in(system).skipped == 2
        cancelled = system.ask("tasks", Cancel(task_id=first.id, origin=HUMAN_CLI))
        assert isinstance(cancelled, CancelAccepted) and cancelled.at_once
        tick(system, 2)
        earlier, later = tasks_in(system)
        assert later.origin == "scheduler" and later.idempotency_key != earlier.idempotency_key
        assert earlier.finished_at is not None and later.created_at >= earlier.finished_at
        assert schedule_in(system).last_task == later.id
        removed = system.ask("scheduler", RemoveSchedule(schedule_id=1))
        assert isinstance(removed, ScheduleRemoved) and system.ask("scheduler", ListSchedules()).schedules == ()
        tick(system, 2)
        assert len(tasks_in(system)) == 2  # a removed schedule submits nothing
        bad = system.ask("scheduler", AddSchedule(spec="every fortnight", request="x"))
        assert isinstance(bad, Refused) and "every" in bad.reason and bad.code == RefusalCode.INVALID


def test_cron_from_the_cli_submits_the_task_when_due(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = daemons.start(env={**FAST_TICKS, **NO_WORKERS})
    added = daemon.cli_json("cron", "add", "every 1s", "tidy the notes", "--repo", str(repo), "--json")
    assert added["spec"] == "every 1s" and added["next_due"] == added["created_at"] + 1
    wait_for(lambda: tasks_of(daemon), what="the first due time's task")
    [task] = tasks_of(daemon)
    assert task["origin"] == "scheduler" and task["idempotency_key"] == f"cron:1:{int(added['next_due'])}"
    removed = daemon.cli_json("cron", "remove", "1", "--json")
    assert removed["id"] == 1 and daemon.cli_json("cron", "list", "--json") == []
    bad = daemon.cli("cron", "add", "every fortnight", "x", "--json")
    refused = orjson.loads(bad.stdout)
    assert bad.returncode == 2 and (refused["status"], refused["code"]) == ("refused", "invalid")
    assert "every" in refused["error"]


def test_a_fenced_daemon_submits_nothing_when_its_schedule_comes_due(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    with running_actors(home, ManualClock(), TICK) as system:
        system.ask("scheduler", AddSchedule(spec="every 2s", request="tidy the notes", repo=str(repo)))
        with taken_over(home), caplog.at_level(logging.INFO, logger="enact.tasks.scheduler_actor"):
            system.clock.advance(2)  # due, after another process took the home over
            system.ask("scheduler", ListSchedules())
            assert "this daemon is fenced; it submits nothing" in caplog.text
            assert tasks_in(system) == []
    assert snapshot(home).databases.get(b"tasks.queue", {}) == {}


def test_backlog_items_wait_in_priority_order_and_promote_into_tasks(daemons: DaemonFactory,
                                                                      tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = daemons.start()
    for text, priority in (("later", "p2"), ("soon", "p1"), ("now", "p0"), ("also soon", "p1")):
        daemon.cli_json("backlog", "add", text, "--priority", priority, "--repo", str(repo), "--json")
    listed = daemon.cli_json("backlog", "list", "--json")
    assert [item["text"] for item in listed] == ["now", "soon", "also soon", "later"]
    assert tasks_of(daemon) == []  # items are not tasks
    promoted = daemon.cli_json("backlog", "promote", "2", "--json")
    assert promoted["item"]["text"] == "soon" and promoted["existing"] is False
    [task] = tasks_of(daemon)
    assert task["id"] == promoted["task_id"] and task["request"] == "soon"
    assert task["idempotency_key"] == "backlog:2"
    dropped = daemon.cli_json("backlog", "drop", "4", "--json")
    assert dropped["text"] == "also soon"
    assert [item["text"] for item in daemon.cli_json("backlog", "list", "--json")] == ["now", "later"]
    gone = daemon.cli("backlog", "promote", "4", "--json")
    assert gone.returncode == 2 and orjson.loads(gone.stdout) == {
        "status": "not_found", "kind": "backlog item", "id": "4", "error": "no backlog item 4"}


def ticks(daemon: Any) -> float:
    """Ticks the scheduler has handled, from the daemon's metrics."""
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    prefix = 'enact_actor_messages_total{actor="scheduler",type="scheduler.Tick"} '
    return next((float(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix)), 0.0)


def test_auto_promote_promotes_the_first_item_only_while_the_queue_is_idle(daemons: DaemonFactory,
                                                                           tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    release = tmp_path / "release"
    home = daemons.new_home()
    # The first task holds a worker until the test lets it go.
    (home / "scripted.toml").write_text(
        '[[rule]]\npurpose = "task"\n'
        f'match = "hold"\nrun = ["sh", "-c", "while [ ! -e {release} ]; do sleep 0.05; done"]\n'
        'reply = "held"\n')
    daemon = daemons.start(home, env={**FAST_TICKS, "ENACT_TASKS_AUTO_PROMOTE": "true",
                                      "ENACT_TASKS_CONFINEMENT": "off"})
    busy = daemon.cli_json("task", "add", "hold the queue", "--repo", str(repo), "--json")
    wait_for(lambda: daemon.task_state(int(busy["id"])) == "running",
             what="the holding task to run")
    for text, priority in (("minor", "p2"), ("urgent", "p0")):
        daemon.cli_json("backlog", "add", text, "--priority", priority, "--repo", str(repo), "--json")
    seen = ticks(daemon)
    wait_for(lambda: ticks(daemon) >= seen + 5, what="five more ticks")
    assert len(daemon.cli_json("backlog", "list", "--json")) == 2  # nothing promoted while a task runs
    assert [task["id"] for task in tasks_of(daemon)] == [busy["id"]]
    release.touch()
    wait_for(lambda: any(task["request"] == "urgent" for task in tasks_of(daemon)), what="urgent promoted")
    promoted = [task for task in tasks_of(daemon) if task["id"] != busy["id"]]
    assert promoted[0]["request"] == "urgent" and promoted[0]["origin"] == "scheduler"
    assert len(promoted) == 1 or promoted[1]["request"] == "minor"


def test_the_backlog_from_chat(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = daemons.start(env={"ENACT_TASKS_DEFAULT_REPO": str(repo)})

    def say(text: str) -> str:
        reply: str = daemon.cli_json("send", "--json", text)["reply"]
        return reply

    assert say("/backlog.add p0: fix the docs") == "backlog item 1 (p0)"
    assert say("/backlog.add tidy up") == "backlog item 2 (p1)"
    assert say("/backlog.list") == "Backlog:\n#1 p0 fix the docs\n#2 p1 tidy up"
    promoted = say("/backlog.promote 2")
    assert promoted.startswith("backlog item 2 is task ")
    [task] = tasks_of(daemon)
    assert task["request"] == "tidy up" and promoted.endswith(str(task["id"]))
    assert say("/cron.list") == "no schedules"


def test_runs_missed_while_the_daemon_was_down_coalesce_into_one_at_start(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home, clock = tmp_path / "home", ManualClock()
    with running_actors(home, clock, TICK) as first:
        added = first.ask("scheduler", AddSchedule(spec="every 2s", request="tidy the notes", repo=str(repo)))
        assert isinstance(added, ScheduleAdded)
    clock.advance(6.5)  # three due times pass while no daemon runs
    with running_actors(home, clock, TICK) as second:
        second.ask("scheduler", ListSchedules())  # answered after the start's own tick
        [task] = tasks_in(second)  # one run for all three
        assert task.idempotency_key == f"cron:1:{int(added.schedule.created_at + 6)}"
        cancelled = second.ask("tasks", Cancel(task_id=task.id, origin=HUMAN_CLI))
        assert isinstance(cancelled, CancelAccepted)
        tick(second, 4)
        later = [int(task.idempotency_key.rsplit(":", 1)[1]) for task in tasks_in(second)][1:]
        assert later == [int(added.schedule.created_at + 8)]  # the next due time, on the schedule's grid


def test_a_claim_left_by_a_crash_after_its_submit_finds_that_task_and_queues_no_second(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home, clock = tmp_path / "home", ManualClock()
    with running_actors(home, clock, TICK) as first:
        first.ask("scheduler", AddSchedule(spec="every 2s", request="tidy the notes", repo=str(repo)))
        tick(first, 2)
        [queued] = tasks_in(first)

    # What a crash right after the submit leaves: the task queued, its due
    # time claimed and not acknowledged.
    due = float(queued.idempotency_key.rsplit(":", 1)[1])
    stored = planted(home, 1, lambda stored: replace(stored, claim=ClaimState(claimed=due), last_due=None,
                                                     last_task=None))
    clock.advance(4.5)  # later due times pass while no daemon runs
    with running_actors(home, clock, TICK) as second:
        # Acknowledged at start, and a later tick found its task still unfinished.
        tick(second, 2)
        after = schedule_in(second)
        assert after.skipped > stored.skipped
        assert after.claim.claimed is None and after.last_task == queued.id
        assert [task.idempotency_key for task in tasks_in(second)] == [queued.idempotency_key]


def test_cron_list_shows_seconds_for_a_schedule_finer_than_a_minute_and_each_schedules_repository(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    app, notes = make_repo(tmp_path / "app"), make_repo(tmp_path / "notes")
    daemon = daemons.start(env=NO_WORKERS)
    hourly = daemon.cli_json("cron", "add", "every 1h", "tidy", "--repo", str(app), "--json")
    added = daemon.cli("cron", "add", "every 10s", "poll", "--repo", str(notes))
    # The 10 s schedule's due time moves on while the test reads it: the
    # shape of its times is what counts.
    to_the_second = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.fullmatch(rf"schedule 2 \(every 10s\), first due {to_the_second}", added.stdout.strip())
    assert [entry["repo"] for entry in daemon.cli_json("cron", "list", "--json")] == [str(app), str(notes)]
    listed = {line.split()[0]: line for line in daemon.cli("cron", "list").stdout.splitlines()}
    assert f"next {time.strftime('%Y-%m-%d %H:%M', time.localtime(hourly['next_due']))}  " in listed["1"]
    assert listed["1"].endswith(f"  {app}  tidy")
    assert re.search(rf"next {to_the_second}  ", listed["2"])
    assert listed["2"].endswith(f"  {notes}  poll")


def test_cron_list_shows_a_pending_claim_with_its_retry_and_the_due_times_given_up(daemons: DaemonFactory,
                                                                                  tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = daemons.start(env=NO_WORKERS)
    first.cli_json("cron", "add", "every 1h", "tidy the notes", "--repo", str(repo), "--json")
    assert first.terminate() == 0
    # What a queue that did not answer leaves: the claim open, backing off.
    claimed_at, retry_at = time.time() - 60, time.time() + 3_000
    failure = "given up after 5 attempts: actor 'tasks' did not answer Submit within 5 s"
    planted(first.home, 1, lambda stored: replace(
        stored, claim=ClaimState(claimed=claimed_at, attempts=2, retry_at=retry_at,
                                 failure="actor 'tasks' did not answer"),
        failed=1, last_failure=failure))
    second = daemons.start(first.home, env=NO_WORKERS)
    [entry] = second.cli_json("cron", "list", "--json")
    assert (entry["claim"]["claimed"], entry["next_due"], entry["claim"]["attempts"]) == (claimed_at, retry_at, 2)
    assert (entry["failed"], entry["last_failure"]) == (1, failure)

    def minute(moment: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment))

    pending = f"claimed {minute(claimed_at)}, pending, retry {minute(retry_at)}"
    listed = second.cli("cron", "list").stdout
    assert pending in listed and "next " not in listed and f"1 failed (latest: {failure})" in listed
    said = second.cli_json("send", "--json", "/cron.list")["reply"]
    assert said == f"Schedules:\n#1 every 1h, {pending}: tidy the notes"
    assert tasks_of(second) == []  # the back-off has not passed: nothing submitted
