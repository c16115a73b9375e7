"""Task branches: named per home, never reset unless this home made them,
deleted when their review is landed or closed, and orphans cleaned up; on
real git repositories, directly and in a running daemon."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from git_repos import commit, git, make_repo
from test_task_workers import UNCONFINED, add, reviews, task_rules, wait_ended
from unprivileged import WHO, Place, place_for

from enact.tasks import task_branches, worktrees
from enact.tasks.host_git import WorktreeError

from conftest import DaemonFactory, wait_for


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_two_homes_on_one_repository_and_a_home_made_afresh_never_share_a_branch(repo: Path,
                                                                                 tmp_path: Path) -> None:
    first = worktrees.prepare(repo, tmp_path / "first", 1)
    second = worktrees.prepare(repo, tmp_path / "second", 1)
    assert first.branch != second.branch
    (second.path / "app.txt").write_text("two\n")
    head = worktrees.capture(second, "change", worktrees.changed_paths(second))
    shutil.rmtree(tmp_path / "first")  # reset: the same place, a new home
    again = worktrees.prepare(repo, tmp_path / "first", 1)
    assert again.branch not in (first.branch, second.branch)
    assert git(repo, "rev-parse", second.branch) == head
    assert git(repo, "rev-parse", first.branch) == first.base  # the old home's branch is left as it was


def test_workers_asking_for_a_new_homes_id_at_once_all_get_the_same_whole_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    barrier = threading.Barrier(8)
    found: list[str] = []

    def ask() -> None:
        barrier.wait()
        found.append(task_branches.home_id(home))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 8 and len(set(found)) == 1 and len(found[0]) == 8
    assert [entry.name for entry in home.iterdir()] == ["home-id"]  # no draft left behind


def test_a_branch_this_home_did_not_make_is_never_reset(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    branch = task_branches.branch_of(home, 3)
    git(repo, "checkout", "-q", "-b", branch)
    someone_elses = commit(repo, {"app.txt": "someone else's work\n"}, "not enact's")
    git(repo, "checkout", "-q", "main")
    with pytest.raises(WorktreeError, match="this home did not make it"):
        worktrees.prepare(repo, home, 3)
    assert git(repo, "rev-parse", branch) == someone_elses
    assert not worktrees.path_of(home, 3).exists()


def test_the_branch_of_an_earlier_attempt_of_the_same_task_is_made_afresh(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = worktrees.prepare(repo, home, 4)
    (tree.path / "app.txt").write_text("half done\n")
    worktrees.capture(tree, "half", worktrees.changed_paths(tree))
    again = worktrees.prepare(repo, home, 4)  # the earlier attempt died before its review
    assert again.branch == tree.branch
    assert git(repo, "rev-parse", again.branch) == again.base


def test_release_deletes_only_the_branch_the_ledger_names(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = worktrees.prepare(repo, home, 5)
    worktrees.remove(tree, home, delete_branch=False)
    assert task_branches.release(home, 5, branch="enact/someone/task-5") is None
    assert tree.branch in git(repo, "branch", "--list")
    assert task_branches.release(home, 5, branch=tree.branch) is not None
    assert tree.branch not in git(repo, "branch", "--list")
    assert list(task_branches.ledger(home)) == []
    assert task_branches.release(home, 6) is None  # never made: nothing to delete


@pytest.mark.parametrize(("task_state", "has_worktree", "review_state", "orphaned"), [
    ("", False, "", True),  # the task is gone
    ("failed", False, "", True),
    ("succeeded", False, "landed", True),
    ("cancelled", False, "closed", True),
    ("failed", True, "", False),  # its kept worktree still shows the work
    ("succeeded", False, "open", False),  # the owner has yet to decide
    ("queued", False, "", False), ("running", False, "", False), ("paused", False, "", False),
])
def test_a_branch_is_orphaned_once_no_task_worktree_or_open_review_needs_it(
        task_state: str, has_worktree: bool, review_state: str, orphaned: bool) -> None:
    assert task_branches.orphaned(task_state=task_state, has_worktree=has_worktree,
                                  review_state=review_state) is orphaned


CHANGE = 'match = "change"\nrun = ["sh", "-c", "echo two > app.txt"]\nreply = "changed"'
BREAK = 'match = "break"\nrun = ["sh", "-c", "rm ok; echo two > app.txt"]\nreply = "broke it"'


def test_a_landed_or_closed_reviews_branch_is_deleted(daemons: DaemonFactory, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = daemons.new_home()
    (home / "scripted.toml").write_text(task_rules(CHANGE))
    daemon = daemons.start(home, env=UNCONFINED)
    landed, closed = add(daemon, repo, "change it"), add(daemon, repo, "change it again")
    for task_id in (landed, closed):
        assert wait_ended(daemon, task_id)["state"] == "succeeded"
    branches = {task_id: task_branches.branch_of(home, task_id) for task_id in (landed, closed)}
    by_task = {review["task_id"]: review["id"] for review in reviews(daemon)}
    assert daemon.cli("review", "land", str(by_task[landed])).returncode == 0
    assert branches[landed] not in git(repo, "branch", "--list")
    assert git(repo, "show", "main:app.txt") == "two"
    assert daemon.cli("review", "close", str(by_task[closed])).returncode == 0
    assert branches[closed] not in git(repo, "branch", "--list")


@pytest.mark.parametrize("who", WHO)
def test_worktree_cleanup_deletes_orphaned_branches_of_this_home_only(daemons: DaemonFactory, tmp_path: Path,
                                                                      who: str) -> None:
    with place_for(who, daemons, tmp_path) as place:
        repo = make_repo(place.base / "repo")
        git(repo, "branch", "enact/0ther0ne/task-1")  # another home's
        (place.home / "scripted.toml").write_text(task_rules(CHANGE, BREAK))
        orphans_cleaned_up(place, daemons, repo)


def orphans_cleaned_up(place: Place, daemons: DaemonFactory, repo: Path) -> None:
    home = place.home
    daemon = place.start(daemons, UNCONFINED)
    cleaned, reviewed, pruned = add(daemon, repo, "break it"), add(daemon, repo, "change it"), \
        add(daemon, repo, "break it too")
    assert [wait_ended(daemon, task_id)["state"] for task_id in (cleaned, reviewed, pruned)] == \
        ["failed", "succeeded", "failed"]
    branch = {task_id: task_branches.branch_of(home, task_id) for task_id in (cleaned, reviewed, pruned)}
    done = daemon.cli_json("worktree", "cleanup", str(cleaned), "--force", "--json")
    assert done["branch"] == branch[cleaned]
    assert branch[cleaned] not in git(repo, "branch", "--list")
    assert daemon.terminate() == 0
    # The prune takes the kept worktree of ``pruned``; its branch stays, orphaned.
    restarted = place.start(daemons, {**UNCONFINED, "ENACT_TASKS_KEEP_FAILED_WORKTREES_DAYS": "0"})
    kept = worktrees.path_of(home, pruned)
    wait_for(lambda: not kept.exists(), what="the kept worktree to be pruned")
    assert branch[pruned] in git(repo, "branch", "--list")
    swept = restarted.cli_json("worktree", "cleanup", "--orphaned-branches", "--json")
    assert swept == {"removed": [f"{repo} {branch[pruned]}"], "failed": []}
    listed = git(repo, "branch", "--list")
    assert branch[pruned] not in listed
    assert branch[reviewed] in listed and "enact/0ther0ne/task-1" in listed  # an open review's; another home's
    assert restarted.cli_json("worktree", "cleanup", "--orphaned-branches", "--json")["removed"] == []
