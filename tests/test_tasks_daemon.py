"""The task queue in a running daemon, through the CLI and the wire: this
test plays the worker, speaking the same typed messages a worker sends."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from task_repos import make_repo

from enact.cli._options import EXIT_TIMED_OUT
from enact.messages.common import Done
from enact.messages.tasks import (
    Claim,
    Claimed,
    Finish,
    Found,
    Get,
    Heartbeat,
    LeaseLost,
    LeaseRenewed,
    NothingQueued,
    ReportPhase,
)
from enact.tasks.records import FailureClass, Outcome, Phase, Task, TaskState, task_log_path

from conftest import Daemon, DaemonFactory, wait_for

NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}
"""This test plays the worker: the daemon's own workers must not claim."""
SHORT_LEASE = {"ENACT_TASKS_LEASE_TTL_S": "1", **NO_WORKERS}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def add(daemon: Daemon, repo: Path, *extra: str) -> dict[str, Any]:
    added: dict[str, Any] = daemon.cli_json("task", "add", "--repo", str(repo), "--json", *extra, "fix the bug")
    return added


def claim(daemon: Daemon, worker: str = "w1") -> Task:
    reply = daemon.request(Claim(worker_id=worker))
    assert isinstance(reply, Claimed), reply
    return reply.task


def task_of(daemon: Daemon, task_id: int) -> Task:
    reply = daemon.request(Get(task_id=task_id))
    assert isinstance(reply, Found)
    return reply.task


def test_add_list_and_show_through_the_cli(daemons: DaemonFactory, repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    added = add(daemon, repo, "--repairs", "3", "--deadline", "120")
    assert added["id"] == 1 and added["state"] == "queued" and added["existing"] is False
    assert added["repo"] == str(repo) and added["repairs"] == 3 and added["deadline_s"] == 120
    listed = daemon.cli_json("task", "list", "--json")
    assert [t["id"] for t in listed] == [1]
    assert daemon.cli_json("task", "list", "--state", "running", "--json") == []
    shown = daemon.cli_json("task", "show", "1", "--json")
    for key in ("id", "state", "phase", "attempt", "confined", "review", "events"):
        assert key in shown
    assert [e["kind"] for e in shown["events"]] == ["queued"]
    text = daemon.cli("task", "show", "1")
    assert text.returncode == 0 and "fix the bug" in text.stdout and "queued" in text.stdout


@pytest.mark.parametrize("args, words", [
    (("--repairs", "9"), "repairs must be between 0 and 5"),
    (("--deadline", "10"), "between 60 and 7200 seconds"),
])
def test_bad_input_is_refused_in_one_line_and_queues_nothing(daemons: DaemonFactory, repo: Path,
                                                            args: tuple[str, ...], words: str) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    result = daemon.cli("task", "add", "--repo", str(repo), "--json", *args, "x")
    assert result.returncode == 2 and words in orjson.loads(result.stdout)["error"]
    plain = daemon.cli("task", "add", "--repo", str(repo.parent), "x")
    assert plain.returncode == 2 and "is not a git repository" in plain.stderr
    assert len(plain.stderr.strip().splitlines()) == 1
    assert daemon.cli_json("task", "list", "--json") == []
    missing = daemon.cli("task", "show", "7", "--json")
    assert missing.returncode == 2 and orjson.loads(missing.stdout) == {
        "status": "not_found", "kind": "task", "id": "7", "error": "no task 7"}


def test_a_worker_runs_a_task_under_its_lease_and_watch_shows_the_outcome(daemons: DaemonFactory,
                                                                         repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    running = claim(daemon, "w1")
    assert isinstance(daemon.request(Claim(worker_id="w2")), NothingQueued)  # never two holders
    status = daemon.cli_json("status", "--json")
    assert [(lease["task_id"], lease["worker_id"]) for lease in status["tasks"]["leases"]] == [(1, "w1")]
    phase = ReportPhase(task_id=1, worker_id="w1", attempt=running.attempt, phase=Phase.REPAIR, repair=1,
                        confined=False, worktree=str(repo))
    assert isinstance(daemon.request(phase), Done)
    assert "w1 on task 1 (repair 1/2)" in daemon.cli("status").stdout
    assert daemon.cli_json("task", "show", "1", "--json")["phase"] == "repair 1/2"
    finish = Finish(task_id=1, worker_id="w1", attempt=running.attempt, outcome=Outcome.SUCCEEDED,
                    summary="one line changed", review_id="r7")
    assert isinstance(daemon.request(finish), Done)
    watched = daemon.cli("task", "watch", "1")
    assert watched.returncode == 0 and "task 1 succeeded, review r7: one line changed" in watched.stdout
    shown = daemon.cli_json("task", "show", "1", "--json")
    assert shown["review"] == "r7" and shown["confined"] is False
    assert [e["kind"] for e in shown["events"]] == ["queued", "claimed", "phase", "succeeded"]


def test_an_unrenewed_lease_is_expired_by_the_queue_and_the_old_holder_refused(daemons: DaemonFactory,
                                                                              repo: Path) -> None:
    daemon = daemons.start(env=SHORT_LEASE)
    add(daemon, repo)
    first = claim(daemon, "w1")
    wait_for(lambda: task_of(daemon, 1).state is TaskState.QUEUED, timeout=10, what="the lease to expire")
    assert task_of(daemon, 1).attempt == 2
    assert isinstance(daemon.request(Heartbeat(task_id=1, worker_id="w1", attempt=first.attempt)), LeaseLost)
    assert claim(daemon, "w2").attempt == 2
    kinds = [e["kind"] for e in daemon.cli_json("task", "show", "1", "--json")["events"]]
    # w2's short lease may lapse too before the events are read (a loaded machine)
    assert kinds[:4] == ["queued", "claimed", "lease-expired", "claimed"]
    assert set(kinds[4:]) <= {"lease-expired"}


def test_a_task_running_when_the_daemon_is_killed_runs_again_after_restart(daemons: DaemonFactory,
                                                                          repo: Path) -> None:
    daemon = daemons.start(env=SHORT_LEASE)
    add(daemon, repo)
    claim(daemon, "w1")
    daemon.kill9()
    restarted = daemons.start(daemon.home, env=SHORT_LEASE)
    wait_for(lambda: task_of(restarted, 1).state is TaskState.QUEUED, timeout=10, what="the lease to expire")
    again = claim(restarted, "w9")
    assert again.id == 1 and again.attempt == 2


def test_cancel_of_a_running_task_reaches_its_worker_on_its_next_heartbeat(daemons: DaemonFactory,
                                                                          repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    running = claim(daemon)
    cancelled = daemon.cli("task", "cancel", "1")
    assert cancelled.returncode == 0 and "next heartbeat" in cancelled.stdout
    beat = daemon.request(Heartbeat(task_id=1, worker_id="w1", attempt=running.attempt))
    assert isinstance(beat, LeaseRenewed) and beat.cancel_requested
    daemon.request(Finish(task_id=1, worker_id="w1", attempt=running.attempt, outcome=Outcome.CANCELLED,
                          summary="stopped by its owner", worktree=str(repo)))
    watched = daemon.cli("task", "watch", "1")
    assert watched.returncode == 1 and "task 1 cancelled" in watched.stdout
    child = daemon.cli_json("task", "retry", "1", "--json")
    assert child["id"] == 2 and child["parent"] == 1 and child["request"] == "fix the bug"
    assert child["existing"] is False
    again = daemon.cli("task", "retry", "1")  # sent twice: the first child, not a second
    assert again.returncode == 0 and "task 2 is already the retry of task 1" in again.stdout
    refused = daemon.cli("task", "retry", "2", "--json")
    said = orjson.loads(refused.stdout)
    assert refused.returncode == 2 and (said["status"], said["code"]) == ("refused", "wrong-state")
    assert "only a failed or cancelled task" in said["error"]


def test_task_show_and_a_refused_retry_say_the_attempt_and_the_state_once(daemons: DaemonFactory,
                                                                            repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    running = claim(daemon)
    daemon.request(Finish(task_id=1, worker_id="w1", attempt=running.attempt, outcome=Outcome.SUCCEEDED,
                          summary="one line changed", review_id="r7"))
    [claimed] = [line for line in daemon.cli("task", "show", "1").stdout.splitlines() if " claimed " in line]
    assert claimed.count("attempt") == 1 and re.search(r"attempt 1 w1  lease of \d+ s$", claimed), claimed
    retried = daemon.cli("task", "retry", "1")
    assert retried.stderr == "enact: task 1 succeeded; only a failed or cancelled task is retried\n"
    resumed = daemon.cli("task", "resume", "1")
    assert resumed.stderr == "enact: task 1 succeeded; only a paused task is resumed\n"


def test_a_queued_task_is_cancelled_at_once(daemons: DaemonFactory, repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    assert daemon.cli_json("task", "cancel", "1", "--json")["at_once"] is True
    assert task_of(daemon, 1).state is TaskState.CANCELLED
    assert isinstance(daemon.request(Claim(worker_id="w1")), NothingQueued)


def test_an_auth_failure_pauses_the_task_until_resume(daemons: DaemonFactory, repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    running = claim(daemon)
    daemon.request(Finish(task_id=1, worker_id="w1", attempt=running.attempt, outcome=Outcome.FAILED,
                          failure_class=FailureClass.AUTH, summary="the runtime refused its credentials"))
    shown = daemon.cli_json("task", "show", "1", "--json")
    assert shown["state"] == "paused" and "enact task resume 1" in shown["summary"]
    resumed = daemon.cli("task", "resume", "1")
    assert resumed.returncode == 0 and "queued again" in resumed.stdout
    assert claim(daemon).id == 1


def test_task_log_prints_the_workers_log_file(daemons: DaemonFactory, repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    missing = daemon.cli("task", "log", "1")
    assert missing.returncode == 1 and "no log yet" in missing.stderr
    path = task_log_path(daemon.home, 1)
    path.parent.mkdir(parents=True)
    path.write_text("$ python -m pytest -q\n1 passed\n")
    assert daemon.cli("task", "log", "1").stdout == "$ python -m pytest -q\n1 passed\n"
    said = daemon.cli_json("task", "log", "1", "--json")
    assert said == {"id": 1, "path": str(path), "log": "$ python -m pytest -q\n1 passed\n"}


def test_task_log_of_a_task_that_does_not_exist_is_not_found(daemons: DaemonFactory) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    plain = daemon.cli("task", "log", "999")
    assert (plain.returncode, plain.stderr) == (2, "enact: no task 999\n")
    said = daemon.cli("task", "log", "999", "--json")
    assert said.returncode == 2
    assert orjson.loads(said.stdout) == {"status": "not_found", "kind": "task", "id": "999", "error": "no task 999"}


def test_task_show_says_a_removed_worktree_was_removed(daemons: DaemonFactory, repo: Path,
                                                       tmp_path: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)
    running = claim(daemon)
    worktree = tmp_path / "worktree-1"
    worktree.mkdir()
    daemon.request(ReportPhase(task_id=1, worker_id="w1", attempt=running.attempt, phase=Phase.REPAIR, repair=1,
                               confined=False, worktree=str(worktree)))
    assert f"worktree  {worktree}\n" in daemon.cli("task", "show", "1").stdout
    worktree.rmdir()
    assert f"worktree  {worktree} (removed)\n" in daemon.cli("task", "show", "1").stdout


def test_task_watch_that_times_out_exits_4_not_as_a_failed_task(daemons: DaemonFactory, repo: Path) -> None:
    daemon = daemons.start(env=NO_WORKERS)
    add(daemon, repo)  # no worker: it stays queued past the timeout
    plain = daemon.cli("task", "watch", "1", "--timeout", "0.1")
    assert plain.returncode == EXIT_TIMED_OUT and plain.stderr == "enact: task 1 is still queued after 0.1 s\n"
    said = daemon.cli("task", "watch", "1", "--timeout", "0.1", "--json")
    assert said.returncode == EXIT_TIMED_OUT
    assert orjson.loads(said.stdout) == {"status": "timed_out", "id": 1, "state": "queued",
                                         "error": "task 1 is still queued after 0.1 s"}
    daemon.request(Finish(task_id=1, worker_id="w1", attempt=claim(daemon).attempt, outcome=Outcome.FAILED,
                          summary="the checks failed"))
    failed = daemon.cli("task", "watch", "1", "--json")
    assert failed.returncode == 1 and orjson.loads(failed.stdout)["state"] == "failed"
