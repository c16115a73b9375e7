"""Task workers in a running daemon: the scripted runtime edits real git
repositories made by the test; the doctor runs their real tests."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from home_state import rewrite_record
from task_repos import git, make_repo

from enact.tasks import task_branches
from enact.tasks.records import Task
from enact.tasks.tables import DATABASES, QUEUE, TASK_VERSION

from conftest import Daemon, DaemonFactory, wait_for

UNCONFINED = {"ENACT_TASKS_CONFINEMENT": "off"}


def task_rules(*tables: str) -> str:
    """Rules for a task's calls: each opts into the task purpose (a rule of no purpose answers only
    the owner's chat messages) and matches the task's request, or a repair's ``repair N/M: …``."""
    return "".join(f'[[rule]]\npurpose = "task"\n{table.strip()}\n\n' for table in tables)


def start(daemons: DaemonFactory, rule_text: str, env: dict[str, str] | None = None) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(rule_text)
    return daemons.start(home, env={**UNCONFINED, **(env or {})})


def add(daemon: Daemon, repo: Path, text: str, *extra: str) -> int:
    added: dict[str, Any] = daemon.cli_json("task", "add", "--repo", str(repo), "--json", *extra, text)
    return int(added["id"])


def show(daemon: Daemon, task_id: int) -> dict[str, Any]:
    shown: dict[str, Any] = daemon.cli_json("task", "show", str(task_id), "--json")
    return shown


def wait_ended(daemon: Daemon, task_id: int, timeout: float = 60) -> dict[str, Any]:
    try:
        wait_for(lambda: daemon.task_state(task_id) in ("succeeded", "failed", "cancelled", "paused"),
                 timeout=timeout, what=f"task {task_id} to end")
    except AssertionError as error:  # what the task and the daemon were doing, for a failure seen once
        shown = daemon.cli("task", "show", str(task_id)).stdout
        raise AssertionError(f"{error}\n--- task {task_id}:\n{shown}\n--- the daemon's log, its end:\n"
                             f"{daemon.log_text()[-6000:]}") from None
    return show(daemon, task_id)


def branch(daemon: Daemon, task_id: int) -> str:
    return task_branches.branch_of(daemon.home, task_id)


def kinds(shown: dict[str, Any]) -> list[str]:
    return [event["kind"] for event in shown["events"]]


def phases(shown: dict[str, Any]) -> list[str]:
    return [event["summary"].split(":")[0] for event in shown["events"] if event["kind"] == "phase"]


def reviews(daemon: Daemon) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = daemon.cli_json("review", "list", "--json")
    return listed


CHECKED = 'match = "mark the answer"\nrun = ["sh", "-c", "echo \'# checked\' >> lib.py"]\nreply = "done"'


def test_a_task_is_validated_captured_and_handed_over_as_a_review(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules(CHECKED))
    task_id = add(daemon, repo, "mark the answer as checked")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "succeeded", shown["summary"]
    assert kinds(shown)[:2] == ["queued", "claimed"]
    assert {"validated", "captured", "review-opened", "succeeded"} <= set(kinds(shown))
    assert shown["confined"] is False
    [review] = reviews(daemon)
    assert review["task_id"] == task_id and str(review["id"]) == str(shown["review"])
    assert git(repo, "log", "-1", "--format=%s", branch(daemon, task_id)).strip() == \
        f"enact task {task_id}: mark the answer as checked"
    assert "# checked" in git(repo, "show", f"{branch(daemon, task_id)}:lib.py")
    assert "# checked" not in (repo / "lib.py").read_text()  # nothing lands without the owner
    assert not (daemon.home / "worktrees" / f"task-{task_id}").exists()
    log = daemon.cli("task", "log", str(task_id))
    assert "passed" in log.stdout
    [watched] = daemon.cli("task", "watch", str(task_id)).stdout.splitlines()
    assert watched.startswith(f"task {task_id} succeeded, review {review['id']}: ")
    assert watched.count(f"review {review['id']}") == 1, watched  # named once, not again in the summary


def test_a_task_that_changes_nothing_succeeds_with_no_changes_and_leaves_no_worktree(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules('match = "look"\nrun = ["true"]\nreply = "nothing to do"'))
    task_id = add(daemon, repo, "look around")
    shown = wait_ended(daemon, task_id)
    assert (shown["state"], shown["summary"]) == ("succeeded", "no changes")
    assert not (daemon.home / "worktrees" / f"task-{task_id}").exists()
    assert branch(daemon, task_id) not in git(repo, "branch", "--list")


def test_a_test_run_that_rewrites_what_it_validated_fails_the_task(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="sh -c 'echo injected >> lib.py'")
    daemon = start(daemons, task_rules(CHECKED))
    task_id = add(daemon, repo, "mark the answer as checked")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "failed", shown
    assert "the test run changed the files it validated" in shown["events"][-1]["summary"]
    assert reviews(daemon) == []


def test_a_repair_in_the_same_session_fixes_a_failing_test(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules(
        'match = "^repair 1/2"\nrun = ["sed", "-i", "s/return 41/return 42/", "lib.py"]\nreply = "fixed"',
        'match = "tune"\nrun = ["sed", "-i", "s/return 42/return 41  # tuned/", "lib.py"]\nreply = "tuned"',
    ))
    task_id = add(daemon, repo, "tune the answer")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "succeeded", (shown["summary"], daemon.cli("task", "log", str(task_id)).stdout)
    assert "repaired" in kinds(shown) and "repair 1/2" in phases(shown)
    assert "return 42  # tuned" in git(repo, "show", f"{branch(daemon, task_id)}:lib.py")
    assert len(reviews(daemon)) == 1
    log = daemon.cli("task", "log", str(task_id)).stdout
    assert "failed (exit 1)" in log and "passed" in log


def test_failure_after_the_repair_limit_keeps_the_worktree_and_says_where(daemons: DaemonFactory,
                                                                          tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules('match = "."\nrun = ["sed", "-i", "s/return 4[12]/return 41/", "lib.py"]\n'
                                  'reply = "tried"'))
    task_id = add(daemon, repo, "break the answer", "--repairs", "1")
    shown = wait_ended(daemon, task_id)
    kept = daemon.home / "worktrees" / f"task-{task_id}"
    assert shown["state"] == "failed"
    assert "validation failed after 1 of 1 repairs" in shown["summary"] and str(kept) in shown["summary"]
    assert "return 41" in (kept / "lib.py").read_text()
    assert reviews(daemon) == []
    [listed] = daemon.cli_json("worktree", "list", "--json")
    assert (listed["task_id"], listed["dirty"], listed["task_state"]) == (task_id, True, "failed")
    refused = daemon.cli("worktree", "cleanup", str(task_id), "--json")
    assert refused.returncode != 0 and "uncommitted changes" in orjson.loads(refused.stdout)["error"]
    assert daemon.cli("worktree", "cleanup", str(task_id), "--force").returncode == 0
    assert not kept.exists()


def test_a_change_to_tests_is_rejected_listing_the_path(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules('match = "answer"\nrun = ["sh", "-c", "echo \'# weakened\' >> '
                                  'tests/test_lib.py"]\nreply = "done"'))
    task_id = add(daemon, repo, "make the answer pass")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "failed" and "tests/test_lib.py" in shown["summary"]
    assert "protected paths changed" in shown["summary"]
    assert reviews(daemon) == []


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_cancel_of_a_running_task_kills_its_subprocess_tree(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "sleeper.pid"
    daemon = start(daemons, task_rules(f'match = "wait"\nrun = ["sh", "-c", "sh -c \'echo $$ > {pid_file}; '
                                  f'exec sleep 300\' & wait"]\nreply = "woke"'))
    task_id = add(daemon, repo, "wait for a long time")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the runtime's grandchild")
    sleeper = int(pid_file.read_text())
    assert _alive(sleeper)
    assert daemon.cli("task", "cancel", str(task_id)).returncode == 0
    shown = wait_ended(daemon, task_id, timeout=20)
    assert shown["state"] == "cancelled"
    wait_for(lambda: not _alive(sleeper), timeout=10, what="the grandchild to be killed")
    assert (daemon.home / "worktrees" / f"task-{task_id}").is_dir()  # kept


def test_a_confined_task_can_write_neither_outside_its_worktree_nor_reach_the_control_socket(
        daemons: DaemonFactory, tmp_path: Path, require_binary: Any) -> None:
    require_binary("bwrap")
    repo = make_repo(tmp_path / "repo", doctor="exit 1")
    outside = Path(__file__).parent / f"escaped-{os.getpid()}-{tmp_path.name}.txt"
    home = daemons.new_home()
    # Inline: a file under /tmp would not be there inside (it gets a private /tmp).
    probe = (
        "import socket, sys\n"
        "report = open('report.txt', 'w')\n"
        "for target in sys.argv[1:3]:\n"
        "    try:\n"
        "        open(target, 'w').write('escaped')\n"
        "        report.write(f'wrote {target}\\n')\n"
        "    except OSError as error:\n"
        "        report.write(f'refused {type(error).__name__}\\n')\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[3]); report.write('reached the socket\\n')\n"
        "except OSError as error:\n"
        "    report.write(f'socket refused {type(error).__name__}\\n')\n")
    run = orjson.dumps([shutil.which("python3") or "python3", "-c", probe, str(outside),
                        str(home / "state" / "escaped"), str(home / "control.sock")]).decode()
    (home / "scripted.toml").write_text(task_rules(f'match = "probe"\nrun = {run}\nreply = "probed"'))
    daemon = daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "auto"})
    task_id = add(daemon, repo, "probe the sandbox", "--repairs", "0")
    shown = wait_ended(daemon, task_id)
    assert shown["confined"] is True
    report = (home / "worktrees" / f"task-{task_id}" / "report.txt").read_text()
    assert "wrote" not in report and "reached the socket" not in report
    assert report.count("refused") == 3
    assert not outside.exists() and not (home / "state" / "escaped").exists()


def plant_deadline(home: Path, task_id: int, deadline_s: int) -> None:
    """A deadline below what a submission may ask (60 s), written while no daemon runs."""
    rewrite_record(home, "tasks", DATABASES, QUEUE, Task, task_id, lambda task: replace(task, deadline_s=deadline_s),
                   version=TASK_VERSION)


def test_a_task_past_its_deadline_is_cancelled_and_fails_permanently(daemons: DaemonFactory,
                                                                     tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "sleeper.pid"
    home = daemons.new_home()
    (home / "scripted.toml").write_text(task_rules(f'match = "wait"\nrun = ["sh", "-c", "echo $$ > {pid_file}; '
                                              f'exec sleep 300"]\nreply = "woke"'))
    idle = daemons.start(home, env={**UNCONFINED, "ENACT_DAEMON_WORKERS": "0"})
    task_id = add(idle, repo, "wait for a long time")
    assert idle.terminate() == 0
    plant_deadline(home, task_id, 2)
    daemon = daemons.start(home, env=UNCONFINED)
    shown = wait_ended(daemon, task_id, timeout=30)
    assert shown["state"] == "failed" and shown["summary"].startswith("deadline of 2 s exceeded in model"), shown
    wait_for(lambda: not _alive(int(pid_file.read_text())), timeout=10, what="the runtime's command to be killed")


def test_two_workers_never_hold_one_task(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    runs = tmp_path / "runs.txt"
    # each run waits until a second has started: the first worker's task holds
    # it until the other worker claims one, so both work whatever the timing
    script = f"basename $PWD >> {runs}; until [ $(wc -l < {runs}) -ge 2 ]; do sleep 0.01; done"
    daemon = start(daemons, task_rules(f'match = "count"\nrun = ["sh", "-c", "{script}"]\n'
                                       'reply = "counted"'), env={"ENACT_DAEMON_WORKERS": "2"})
    ids = [add(daemon, repo, f"count me {n}") for n in range(8)]
    for task_id in ids:
        ended = wait_ended(daemon, task_id)
        assert ended["state"] == "succeeded", ended["summary"]
    assert sorted(runs.read_text().split()) == sorted(f"task-{task_id}" for task_id in ids)
    workers = set()
    for task_id in ids:
        claims = [event for event in show(daemon, task_id)["events"] if event["kind"] == "claimed"]
        assert len(claims) == 1
        workers.add(claims[0]["worker"])
    assert len(workers) == 2  # both worked, each on tasks of its own


def test_kill_9_mid_task_then_restart_runs_it_again_with_exactly_one_review(daemons: DaemonFactory,
                                                                           tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "first-attempt"
    script = f"if [ -e {marker} ]; then echo '# checked' >> lib.py; else touch {marker}; exec sleep 300; fi"
    rule = task_rules(f'match = "mark"\nrun = ["sh", "-c", "{script}"]\nreply = "done"')
    lease = {"ENACT_TASKS_LEASE_TTL_S": "2"}
    daemon = start(daemons, rule, env=lease)
    task_id = add(daemon, repo, "mark the answer")
    wait_for(marker.exists, what="the first attempt to be under way")
    daemon.kill9()
    restarted = daemons.start(daemon.home, env={**UNCONFINED, **lease})
    shown = wait_ended(restarted, task_id)
    assert shown["state"] == "succeeded", shown["summary"]
    assert "lease-expired" in kinds(shown) and shown["attempt"] == 2
    assert [review["task_id"] for review in reviews(restarted)] == [task_id]


def test_a_graceful_stop_mid_task_hands_it_back_without_using_up_an_attempt(daemons: DaemonFactory,
                                                                         tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "first-attempt.pid"
    script = (f"if [ -e {pid_file} ]; then echo '# checked' >> lib.py; "
              f"else echo $$ > {pid_file}; exec sleep 300; fi")
    rule = task_rules(f'match = "mark"\nrun = ["sh", "-c", "{script}"]\nreply = "done"')
    daemon = start(daemons, rule)
    task_id = add(daemon, repo, "mark the answer")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the first attempt to be under way")
    assert daemon.cli("daemon", "stop").returncode == 0
    assert daemon.wait_exit(30) == 0
    wait_for(lambda: not _alive(int(pid_file.read_text())), timeout=10, what="the runtime's command to be killed")
    restarted = daemons.start(daemon.home, env=UNCONFINED)
    shown = wait_ended(restarted, task_id)
    assert shown["state"] == "succeeded", shown["summary"]
    assert "interrupted" in kinds(shown) and "lease-expired" not in kinds(shown)
    assert (shown["attempt"], shown["uncounted_attempts"]) == (2, 1)


def _with_an_earlier_attempts_review(daemons: DaemonFactory, tmp_path: Path) -> tuple[Daemon, Path, Path]:
    """A daemon whose task 1 (not yet added) already has an open review on its
    branch, as a crash between reviews.Open and tasks.Finish leaves it; the
    repository, and the file the model's rule touches if it is asked again."""
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "branch", "enact/task-1")
    marker = tmp_path / "worked-again"
    daemon = start(daemons, task_rules(f'match = "mark"\nrun = ["sh", "-c", "touch {marker}; echo x >> lib.py"]\n'
                                  'reply = "done"'))
    body = {"task_id": 1, "repo": str(repo), "branch": "enact/task-1", "base": base, "head": base}
    opened = daemon.cli("call", "--json", "reviews.Open", orjson.dumps(body).decode())
    assert opened.returncode == 0, opened.stderr + opened.stdout
    return daemon, repo, marker


def test_a_task_whose_review_an_earlier_attempt_opened_finishes_with_it_without_redoing_the_work(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon, repo, marker = _with_an_earlier_attempts_review(daemons, tmp_path)
    task_id = add(daemon, repo, "mark the answer")
    assert task_id == 1
    shown = wait_ended(daemon, task_id)
    assert (shown["state"], str(shown["review"])) == ("succeeded", "1"), shown
    assert "review-opened" in kinds(shown)
    assert not marker.exists()  # the model was not asked again
    assert [(review["id"], review["task_id"], review["state"]) for review in reviews(daemon)] == \
        [(1, task_id, "open")]


def test_a_task_whose_earlier_review_the_owner_closed_ends_cancelled_without_redoing_the_work(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    # The owner closed that review before the task ran again; the earlier
    # attempt also died before removing its worktree.
    daemon, repo, marker = _with_an_earlier_attempts_review(daemons, tmp_path)
    closed = daemon.cli("review", "close", "1")
    assert closed.returncode == 0, closed.stderr + closed.stdout
    leftover = daemon.home / "worktrees" / "task-1"
    git(repo, "worktree", "add", str(leftover), "enact/task-1")
    task_id = add(daemon, repo, "mark the answer")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "cancelled", shown
    assert "the owner closed its review" in shown["summary"]
    assert shown["attempt"] == 1 and kinds(shown) == ["queued", "claimed", "cancelled"]
    assert not marker.exists()  # the model was not asked again
    assert not leftover.exists()
    assert [(review["id"], review["state"]) for review in reviews(daemon)] == [(1, "closed")]


@pytest.fixture(autouse=True)
def _no_escape_files() -> Any:
    yield
    for leftover in Path(__file__).parent.glob("escaped-*"):
        leftover.unlink()


def test_kept_worktrees_of_failed_tasks_are_pruned_after_the_keep_period(daemons: DaemonFactory,
                                                                        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="exit 1")
    daemon = start(daemons, task_rules('match = "."\nrun = ["sh", "-c", "echo x >> lib.py"]\nreply = "tried"'))
    task_id = add(daemon, repo, "try once", "--repairs", "0")
    assert wait_ended(daemon, task_id)["state"] == "failed"
    kept = daemon.home / "worktrees" / f"task-{task_id}"
    assert kept.is_dir()
    assert daemon.terminate() == 0
    restarted = daemons.start(daemon.home, env={**UNCONFINED, "ENACT_TASKS_KEEP_FAILED_WORKTREES_DAYS": "0"})
    wait_for(lambda: not kept.exists(), what="the kept worktree to be pruned")
    assert restarted.cli_json("worktree", "list", "--json") == []
    assert branch(restarted, task_id) in git(repo, "branch", "--list")


@pytest.mark.parametrize(("fail_as", "state", "event"), [
    ("unavailable", "queued", "retrying"),  # transient: queued again after the back-off
    ("auth", "paused", "paused"),  # paused until the owner resumes it
])
def test_runtime_failures_are_classified_for_the_queue(daemons: DaemonFactory, tmp_path: Path, fail_as: str,
                                                      state: str, event: str) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules(f'match = "."\nfail = "the model is away"\nfail_as = "{fail_as}"'))
    task_id = add(daemon, repo, "anything")
    wait_for(lambda: event in kinds(show(daemon, task_id)), what=f"the {event} event")
    shown = show(daemon, task_id)
    assert shown["state"] == state and "the model is away" in shown["summary"]
    assert (daemon.home / "worktrees" / f"task-{task_id}").is_dir()


def test_status_lists_every_worker_idle_or_with_the_task_it_holds(daemons: DaemonFactory, tmp_path: Path) -> None:
    slow = 'match = "take your time"\nrun = ["sleep", "30"]\nreply = "done"'
    daemon = start(daemons, task_rules(slow))
    wait_for(lambda: "worker:0 idle, worker:1 idle" in daemon.cli("status").stdout, timeout=30)
    task_id = add(daemon, make_repo(tmp_path / "repo"), "take your time")
    wait_for(lambda: show(daemon, task_id)["phase"] == "model", timeout=30)
    workers = daemon.cli_json("status", "--json")["workers"]
    assert sorted(w["task"] is None for w in workers) == [False, True]
    busy = next(w for w in workers if w["task"] is not None)
    assert busy["task"] == task_id and busy["progress"].startswith("model")
    assert f"{busy['name']} on task {task_id} (model" in daemon.cli("status").stdout
    daemon.cli("task", "cancel", str(task_id))
