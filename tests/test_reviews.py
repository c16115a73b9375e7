"""Reviews in a running daemon: opened once per task, landed only by a person
and only when the doctor passes on the merged result, closed; on real git
repositories, through the CLI, the wire and chat."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

from git_repos import commit, git, make_repo, task_branch

from enact.cancellation import CancellationToken
from enact.commands import CommandCall, CommandContext, CommandRegistry
from enact.messages.common import MODEL_ACTION
from enact.messages.reviews import LandRefusal
from enact.tasks.metrics import TasksMetrics
from enact.tasks.review_commands import review_commands

from conftest import Daemon, DaemonFactory, enact_env, wait_for

LAND_RULES = """
[[rule]]
match = "land review one"
action = "review.land"
args = { text = "1" }
then = "Landing said: {receipt}"
"""


def open_review(daemon: Daemon, task_id: int, repo: Path, branch: str, base: str, head: str) -> dict[str, Any]:
    body = {"task_id": task_id, "repo": str(repo), "branch": branch, "base": base, "head": head,
            "diffstat": " app.txt | 2 +-", "doctor_summary": "`test -f ok` passed"}
    done = daemon.cli("call", "--json", "reviews.Open", json.dumps(body))
    assert done.returncode == 0, done.stderr + done.stdout
    reply: dict[str, Any] = json.loads(done.stdout)["body"]
    return reply


def land(daemon: Daemon, review_id: int) -> tuple[int, dict[str, Any]]:
    done = daemon.cli("review", "land", str(review_id), "--json")
    return done.returncode, json.loads(done.stdout)


def reviews(daemon: Daemon) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = daemon.cli_json("review", "list", "--json")
    return listed


def test_a_task_opening_its_review_again_gets_the_same_one(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, head = task_branch(repo, "enact/task-4", {"app.txt": "two\n"})
    daemon = daemons.start()
    assert open_review(daemon, 4, repo, "enact/task-4", base, head) == {"review_id": 1, "existing": False}
    assert open_review(daemon, 4, repo, "enact/task-4", base, head) == {"review_id": 1, "existing": True}
    # The task ran again after a crash and captured anew: still one review, showing the new head.
    _, again = task_branch(repo, "enact/task-4b", {"app.txt": "three\n"})
    assert open_review(daemon, 4, repo, "enact/task-4b", base, again) == {"review_id": 1, "existing": True}
    [only] = reviews(daemon)
    assert (only["id"], only["task_id"], only["state"], only["head"]) == (1, 4, "open", again)
    shown = daemon.cli_json("review", "show", "1", "--json")
    assert shown["branch"] == "enact/task-4b" and shown["doctor_summary"] == "`test -f ok` passed"
    diff = daemon.cli("review", "diff", "1")
    assert "+three" in diff.stdout and "-one" in diff.stdout
    missing = daemon.cli("review", "show", "9", "--json")
    assert missing.returncode == 2 and json.loads(missing.stdout) == {
        "status": "not_found", "kind": "review", "id": "9", "error": "no review 9"}


def test_land_refuses_on_a_failing_doctor_and_lands_on_a_passing_one(daemons: DaemonFactory,
                                                                     tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    start = git(repo, "rev-parse", "main")
    base, breaking = task_branch(repo, "enact/task-1", {"app.txt": "two\n"}, deleted=("ok",))
    _, passing = task_branch(repo, "enact/task-2", {"app.txt": "two\n"})
    daemon = daemons.start()
    open_review(daemon, 1, repo, "enact/task-1", base, breaking)
    open_review(daemon, 2, repo, "enact/task-2", base, passing)

    code, refused = land(daemon, 1)
    assert code == 2 and (refused["status"], refused["code"]) == ("refused", "doctor-failed"), refused
    assert "test -f ok" in refused["error"]
    assert git(repo, "rev-parse", "main") == start and (repo / "ok").exists()
    assert daemon.cli_json("review", "show", "1", "--json")["state"] == "open"

    code, landed = land(daemon, 2)
    assert code == 0, landed
    assert landed["state"] == "landed" and landed["fast_forward"] is True
    assert landed["landed_revision"] == passing == git(repo, "rev-parse", "main")
    assert (repo / "app.txt").read_text() == "two\n"
    assert "passed" in landed["note"]
    again_code, again = land(daemon, 2)
    assert again_code == 2 and again["code"] == "not-open"
    assert not any((daemon.home / "reviews" / "landing").iterdir())  # no temporary worktree left
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    metrics = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    for outcome, count in (("doctor-failed", 1), ("landed", 1), ("not-open", 1), ("conflict", 0)):
        assert f'enact_review_lands_total{{outcome="{outcome}"}} {count}.0' in metrics


def test_every_land_refusal_is_a_counted_outcome() -> None:
    assert set(TasksMetrics.LAND_OUTCOMES) == {"landed"} | {refusal.value for refusal in LandRefusal}


def test_a_workers_review_lands_the_task_into_the_repository(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    (home / "scripted.toml").write_text('[[rule]]\npurpose = "task"\nmatch = "change app"\n'
                                        'run = ["sh", "-c", "echo two > app.txt"]\n'
                                        'reply = "changed"\n')
    daemon = daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off"})
    task = daemon.cli_json("task", "add", "change app.txt to two", "--repo", str(repo), "--json")
    wait_for(lambda: daemon.task_state(int(task["id"])) == "succeeded",
             timeout=60, what="the task to succeed")
    [review] = reviews(daemon)
    assert review["task_id"] == task["id"] and review["state"] == "open" and "app.txt" in review["diffstat"]
    assert (repo / "app.txt").read_text() == "one\n"
    code, landed = land(daemon, review["id"])
    assert code == 0, landed
    assert (repo / "app.txt").read_text() == "two\n"
    assert git(repo, "rev-parse", "main") == review["head"] == landed["landed_revision"]


def test_a_landed_merge_is_the_owners_commit_and_the_workers_own_commit_stays_enacts(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "user.name", "Ada Owner")
    git(repo, "config", "user.email", "ada@example.invalid")
    home = daemons.new_home()
    (home / "scripted.toml").write_text('[[rule]]\npurpose = "task"\nmatch = "add a feature"\n'
                                        'run = ["sh", "-c", "echo new > feature.txt"]\nreply = "added"\n')
    daemon = daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off"})
    task = daemon.cli_json("task", "add", "add a feature file", "--repo", str(repo), "--json")
    wait_for(lambda: daemon.task_state(int(task["id"])) == "succeeded",
             timeout=60, what="the task to succeed")
    [review] = reviews(daemon)
    commit(repo, {"app.txt": "owner's two\n"}, "owner moved on")  # a merge, not a fast-forward
    code, landed = land(daemon, review["id"])
    assert code == 0, landed
    assert landed["fast_forward"] is False and landed["merged_by"] == "Ada Owner <ada@example.invalid>"
    assert "(merge commit by Ada Owner <ada@example.invalid>)" in landed["note"]
    merge = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%(trailers:key=Landed-by,valueonly,separator=)")
    assert merge.split("|") == ["Ada Owner <ada@example.invalid>", "Ada Owner <ada@example.invalid>",
                                f"enact (review {review['id']}, task {task['id']})"]
    # The task's own commit, the agent's work, is enact's.
    assert git(repo, "log", "-1", "--format=%an <%ae>", review["head"]) == "enact <enact@localhost>"


def test_while_one_land_runs_its_doctor_the_reviews_answer_and_a_second_land_is_refused(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    release = tmp_path / "release"
    repo = make_repo(tmp_path / "repo", doctor=f"while [ ! -e {release} ]; do sleep 0.05; done")
    base, first = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    _, second = task_branch(repo, "enact/task-2", {"other.txt": "x\n"})
    daemon = daemons.start(env={"ENACT_TASKS_CONFINEMENT": "off"})
    open_review(daemon, 1, repo, "enact/task-1", base, first)
    open_review(daemon, 2, repo, "enact/task-2", base, second)
    landing = subprocess.Popen([sys.executable, "-m", "enact", "review", "land", "1", "--json"],
                               env=enact_env(daemon.home), stdout=subprocess.PIPE, text=True)
    try:
        scratch = daemon.home / "reviews" / "landing"
        wait_for(lambda: scratch.is_dir() and any(scratch.iterdir()), what="the first land's doctor")
        assert [r["state"] for r in reviews(daemon)] == ["open", "open"]  # the actor answers meanwhile
        code, refused = land(daemon, 2)
        assert code == 1 and refused["code"] == "busy", refused  # busy: the same land may work later
        release.touch()
        out, _ = landing.communicate(timeout=60)
    finally:
        if landing.poll() is None:
            landing.kill()
    assert landing.returncode == 0 and json.loads(out)["state"] == "landed"
    assert git(repo, "rev-parse", "main") == first


def test_land_refuses_a_dirty_target_and_a_conflict(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    daemon = daemons.start()
    open_review(daemon, 1, repo, "enact/task-1", base, head)
    (repo / "app.txt").write_text("the owner's edit in progress\n")
    code, refused = land(daemon, 1)
    assert code == 2 and refused["code"] == "dirty-target" and "app.txt" in refused["error"]
    assert (repo / "app.txt").read_text() == "the owner's edit in progress\n"
    git(repo, "checkout", "--", "app.txt")
    moved = commit(repo, {"app.txt": "the owner's two\n"}, "owner moved on")
    code, refused = land(daemon, 1)
    assert code == 2 and refused["code"] == "conflict" and "app.txt" in refused["error"]
    assert git(repo, "rev-parse", "main") == moved and git(repo, "status", "--porcelain") == ""


def test_closed_review_stays_closed_and_cannot_be_landed(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    daemon = daemons.start()
    open_review(daemon, 1, repo, "enact/task-1", base, head)
    closed = daemon.cli_json("review", "close", "1", "--reason", "not needed", "--json")
    assert closed["state"] == "closed" and closed["note"] == "closed by human-cli: not needed"
    code, refused = land(daemon, 1)
    assert code == 2 and refused["code"] == "not-open"
    assert git(repo, "rev-parse", "--verify", "enact/task-1") == head  # the branch stays
    assert [r["state"] for r in reviews(daemon)] == ["closed"]
    assert daemon.cli_json("review", "list", "--state", "open", "--json") == []


def test_a_model_action_cannot_land_but_the_owner_in_a_locked_chat_can(daemons: DaemonFactory,
                                                                      tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base, head = task_branch(repo, "enact/task-1", {"app.txt": "two\n"})
    home = daemons.new_home()
    (home / "scripted.toml").write_text(LAND_RULES)
    (home / "config.toml").write_text(textwrap.dedent('[chat]\nallowed_conversations = ["local:owner"]\n'))
    daemon = daemons.start(home)
    open_review(daemon, 1, repo, "enact/task-1", base, head)

    asked = daemon.cli_json("send", "--conversation", "owner", "--json", "land review one")
    assert "needs a human" in asked["reply"], asked
    assert daemon.cli_json("review", "show", "1", "--json")["state"] == "open"
    assert git(repo, "rev-parse", "main") == base

    typed = daemon.cli_json("send", "--conversation", "owner", "--json", "/review.land 1")
    assert "landed on main" in typed["reply"], typed
    assert git(repo, "rev-parse", "main") == head
    assert daemon.cli_json("review", "show", "1", "--json")["state"] == "landed"


def test_chat_without_the_conversation_lock_cannot_cancel_retry_or_resume_a_task() -> None:
    from enact.tasks.from_chat import task_commands

    registry = CommandRegistry()
    for command in task_commands():
        registry.register(command)
    registry.bind(CommandContext(fence=AlwaysCurrent(), status=lambda: ""))  # type: ignore[arg-type]
    for name in ("task.cancel", "task.retry", "task.resume"):
        call = CommandCall(name=name, args={"text": "1"}, origin="chat:telegram", event_origin="chat:telegram",
                           owners=False, cancel=CancellationToken())
        refused = registry.run(call)
        assert not refused.ok and "needs the conversation lock" in refused.text, refused


def test_chat_without_the_conversation_lock_cannot_land_or_close() -> None:
    registry = CommandRegistry()
    for command in review_commands():
        registry.register(command)
    registry.bind(CommandContext(fence=AlwaysCurrent(), status=lambda: ""))  # type: ignore[arg-type]
    for name in ("review.land", "review.close"):
        call = CommandCall(name=name, args={"text": "1"}, origin="chat:telegram", event_origin="chat:telegram",
                           owners=False, cancel=CancellationToken())
        refused = registry.run(call)
        assert not refused.ok and "needs the conversation lock" in refused.text, refused
        model = dataclasses.replace(call, origin=MODEL_ACTION, owners=True)
        assert registry.run(model).text.startswith(f"refused: {name} needs a human")


class AlwaysCurrent:
    def is_current(self) -> bool:
        return True
