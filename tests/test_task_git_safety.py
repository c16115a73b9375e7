"""The host and a task's git, in a running daemon with real bubblewrap: the
host never runs git through anything the task wrote in its worktree (a
planted ``.git``, ``.gitattributes`` and the filter they name), and the task
has a working git of its own that leaves the owner's repository alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hostile_git import plant_rule
from task_repos import git, make_repo
from test_task_workers import UNCONFINED, add, reviews, task_rules, wait_ended
from unprivileged import WHO, place_for

from enact.tasks import task_branches

from conftest import Daemon, DaemonFactory, wait_for

CONFINED = {"ENACT_TASKS_CONFINEMENT": "auto"}


@pytest.fixture(autouse=True)
def _bwrap(require_binary: Any) -> None:
    require_binary("bwrap")


def start(daemons: DaemonFactory, rule_text: str, env: dict[str, str] | None = None,
          home: Path | None = None) -> Daemon:
    home = home or daemons.new_home()
    (home / "scripted.toml").write_text(rule_text)
    return daemons.start(home, env={**CONFINED, **(env or {})})


def planted_and_kept(daemons: DaemonFactory, tmp_path: Path, count: int) -> tuple[Daemon, Path, list[int]]:
    """A daemon whose ``count`` tasks each planted a hostile git in their
    worktree and failed validation, so their worktrees are kept; the marker
    the planted commands would touch."""
    repo = make_repo(tmp_path / "repo", doctor="exit 1")
    marker = tmp_path / "planted-ran"
    daemon = start(daemons, task_rules(plant_rule("plant", str(marker))))
    ids = [add(daemon, repo, f"plant {n}", "--repairs", "0") for n in range(count)]
    for task_id in ids:
        shown = wait_ended(daemon, task_id)
        assert (shown["state"], shown["confined"]) == ("failed", True), shown
        assert (daemon.home / "worktrees" / f"task-{task_id}" / ".planted-git").is_dir()
    return daemon, marker, ids


def test_a_planted_git_file_never_runs_a_filter_on_the_host_when_worktrees_are_listed_or_cleaned_up(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon, marker, [task_id] = planted_and_kept(daemons, tmp_path, 1)
    [listed] = daemon.cli_json("worktree", "list", "--json")
    assert (listed["task_id"], listed["dirty"], listed["repo"]) == (task_id, True, str(tmp_path / "repo"))
    assert listed["branch"] == task_branches.branch_of(daemon.home, task_id)
    done = daemon.cli("worktree", "cleanup", str(task_id), "--force")
    assert done.returncode == 0, done.stderr
    assert not (daemon.home / "worktrees" / f"task-{task_id}").exists()
    assert "task-" not in git(tmp_path / "repo", "worktree", "list")  # forgotten through the record
    assert not marker.exists()


def test_a_planted_git_file_never_runs_a_filter_on_the_host_when_a_restart_prunes_kept_worktrees(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon, marker, [task_id] = planted_and_kept(daemons, tmp_path, 1)
    assert daemon.terminate() == 0
    kept = daemon.home / "worktrees" / f"task-{task_id}"
    restarted = daemons.start(daemon.home, env={**CONFINED, "ENACT_TASKS_KEEP_FAILED_WORKTREES_DAYS": "0"})
    wait_for(lambda: not kept.exists(), what="the kept worktree to be pruned")
    assert restarted.cli_json("worktree", "list", "--json") == []
    assert not marker.exists()


@pytest.mark.parametrize("who", WHO)
def test_a_planted_git_file_never_runs_a_filter_on_the_host_when_the_change_is_captured_and_landed(
        daemons: DaemonFactory, tmp_path: Path, who: str) -> None:
    with place_for(who, daemons, tmp_path) as place:
        repo = make_repo(place.base / "repo", doctor="true")
        marker = place.base / "planted-ran"
        (place.home / "scripted.toml").write_text(task_rules(plant_rule("plant", str(marker), python=place.python)))
        daemon = place.start(daemons, CONFINED)
        captured_and_landed(daemon, repo, marker)


def captured_and_landed(daemon: Daemon, repo: Path, marker: Path) -> None:
    task_id = add(daemon, repo, "plant it")
    shown = wait_ended(daemon, task_id)
    assert (shown["state"], shown["confined"]) == ("succeeded", True), daemon.cli("task", "log", str(task_id)).stdout
    branch = task_branches.branch_of(daemon.home, task_id)
    assert git(repo, "show", f"{branch}:lib.py").endswith("# changed\n")
    assert not marker.exists()
    [review] = reviews(daemon)
    landed = daemon.cli("review", "land", str(review["id"]), "--json")
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert (repo / "lib.py").read_text().endswith("# changed\n")
    assert not marker.exists()


GIT_AT_WORK = r"""
report=git-report.txt
try() { if "$@" >/dev/null 2>&1; then echo "ok: $*" >> $report; else echo "FAILED: $*" >> $report; fi; }
try git status
echo staged >> lib.py
try git add lib.py
try git restore --staged lib.py
try git restore lib.py
echo checked-out >> lib.py
try git checkout -- lib.py
echo stashed >> lib.py
try git stash
try git stash pop
try git commit -qam "the task's own commit"
echo "branch: $(git branch --show-current)" >> $report
echo "log: $(git log -1 --format=%s)" >> $report
"""


@pytest.mark.parametrize("who", WHO)
def test_git_works_inside_a_confined_task_on_its_real_branch_and_the_owners_repository_is_unchanged(
        daemons: DaemonFactory, tmp_path: Path, who: str) -> None:
    with place_for(who, daemons, tmp_path) as place:
        # As root under /tmp, which the task sees a private one of.
        repo = make_repo(place.base / "repo", doctor="exit 1")
        run = orjson.dumps(["sh", "-c", GIT_AT_WORK]).decode()
        (place.home / "scripted.toml").write_text(task_rules(f'match = "use git"\nrun = {run}\nreply = "used git"'))
        daemon = place.start(daemons, CONFINED)
        git_at_work(daemon, repo)


def owners_view(repo: Path, *, but: str = "") -> dict[str, str | bytes]:
    """What the owner sees of ``repo``: its refs (but the branch ``but``),
    status, index and HEAD."""
    refs = "".join(line + "\n" for line in git(repo, "for-each-ref").splitlines() if not but or not line.endswith(but))
    return {"refs": refs, "status": git(repo, "status", "--porcelain"),
            "index": (repo / ".git" / "index").read_bytes(), "head": git(repo, "rev-parse", "HEAD")}


def git_at_work(daemon: Daemon, repo: Path) -> None:
    before = owners_view(repo)
    task_id = add(daemon, repo, "use git", "--repairs", "0")
    shown = wait_ended(daemon, task_id)
    assert (shown["state"], shown["confined"]) == ("failed", True), shown
    report = (daemon.home / "worktrees" / f"task-{task_id}" / "git-report.txt").read_text()
    assert "FAILED" not in report, report
    assert report.count("ok: ") == 8, report
    branch = task_branches.branch_of(daemon.home, task_id)
    assert f"branch: {branch}\n" in report and "log: the task's own commit" in report
    assert owners_view(repo, but=branch) == before
    assert git(repo, "rev-parse", branch) == before["head"]  # the task's commit is its own, not the host's


def test_an_unconfined_task_gets_its_own_git_too(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", doctor="exit 1")
    run = orjson.dumps(["sh", "-c", GIT_AT_WORK]).decode()
    daemon = start(daemons, task_rules(f'match = "use git"\nrun = {run}\nreply = "used git"'), env=UNCONFINED)
    task_id = add(daemon, repo, "use git", "--repairs", "0")
    assert wait_ended(daemon, task_id)["state"] == "failed"
    report = (daemon.home / "worktrees" / f"task-{task_id}" / "git-report.txt").read_text()
    assert "FAILED" not in report and f"branch: {task_branches.branch_of(daemon.home, task_id)}" in report

