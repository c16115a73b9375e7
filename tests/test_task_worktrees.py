"""Task worktrees on real git repositories made by the test."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hostile_git import plant_argv
from task_repos import git, make_repo

from enact.tasks import task_branches, worktrees
from enact.tasks.host_git import WorktreeError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_prepare_branches_from_the_checked_out_branch_head(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "-b", "work")
    (repo / "lib.py").write_text("def answer():\n    return 43\n")
    git(repo, "commit", "-qam", "on work")
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = worktrees.prepare(repo, tmp_path / "home", 7)
    branch = task_branches.branch_of(tmp_path / "home", 7)
    assert tree.path == tmp_path / "home" / "worktrees" / "task-7"
    assert (tree.branch, tree.base_branch, tree.base) == (branch, "work", head)
    assert git(repo, "rev-parse", branch).strip() == head
    assert git(tree.path, "branch", "--show-current").strip() == branch
    assert "43" in (tree.path / "lib.py").read_text()


def test_prepare_refuses_a_detached_head_and_a_directory_that_is_not_a_repository(repo: Path,
                                                                                  tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(WorktreeError, match="detached HEAD"):
        worktrees.prepare(repo, tmp_path / "home", 1)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError, match="not a git repository"):
        worktrees.prepare(plain, tmp_path / "home", 1)


def test_changed_paths_see_edits_new_files_deletions_and_what_the_task_committed_in_its_own_git(
        repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 1)
    assert worktrees.changed_paths(tree) == []
    (tree.path / "lib.py").write_text("changed\n")
    (tree.path / "new dir").mkdir()
    (tree.path / "new dir" / "n.txt").write_text("n\n")
    (tree.path / "tests" / "test_lib.py").unlink()
    (tree.path / "__pycache__").mkdir()
    (tree.path / "__pycache__" / "x.pyc").write_text("")
    assert worktrees.changed_paths(tree) == ["lib.py", "new dir/n.txt", "tests/test_lib.py"]
    git(tree.path, "commit", "-qam", "the task committed")
    assert worktrees.changed_paths(tree) == ["lib.py", "new dir/n.txt", "tests/test_lib.py"]


def test_capture_commits_on_the_task_branch_naming_the_task(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 12)
    (tree.path / "lib.py").write_text("def answer():\n    return 42  # checked\n")
    head = worktrees.capture(tree, "Mark the answer as checked\nmore words", worktrees.changed_paths(tree))
    assert git(repo, "rev-parse", tree.branch).strip() == head
    assert git(repo, "log", "-1", "--format=%s", head).strip() == "enact task 12: Mark the answer as checked"
    assert git(repo, "rev-parse", "main").strip() == tree.base  # the authoritative branch did not move
    assert "lib.py" in worktrees.diffstat(tree, head)
    assert not worktrees.info(tmp_path / "home", 12).dirty  # type: ignore[union-attr]


def test_a_second_prepare_of_the_same_task_starts_afresh(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 3)
    (tree.path / "leftover.txt").write_text("from a worker that died\n")
    again = worktrees.prepare(repo, tmp_path / "home", 3)
    assert not (again.path / "leftover.txt").exists()
    assert worktrees.changed_paths(again) == []


def test_remove_with_its_branch_leaves_no_trace(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 4)
    worktrees.remove(tree, tmp_path / "home", delete_branch=True)
    assert not tree.path.exists()
    assert tree.branch not in git(repo, "branch", "--list")
    assert str(tree.path) not in git(repo, "worktree", "list")
    assert worktrees.list_worktrees(tmp_path / "home") == []


def test_list_and_cleanup_refusals(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    clean = worktrees.prepare(repo, home, 5)
    dirty = worktrees.prepare(repo, home, 6)
    (dirty.path / "lib.py").write_text("half done\n")
    listed = worktrees.list_worktrees(home)
    assert [(item.task_id, item.dirty, item.repo) for item in listed] == [(5, False, repo), (6, True, repo)]
    five, six = listed
    assert "is running" in (worktrees.cleanup_refusal(five, task_state="running", force=True) or "")
    assert "uncommitted changes" in (worktrees.cleanup_refusal(six, task_state="failed", force=False) or "")
    assert worktrees.cleanup_refusal(six, task_state="failed", force=True) is None
    worktrees.cleanup(home, six)
    assert not dirty.path.exists() and clean.path.exists()
    assert dirty.branch in git(repo, "branch", "--list")  # a review may still name it


def test_listing_worktrees_writes_no_index_so_it_never_holds_a_capture_s_lock(repo: Path, tmp_path: Path) -> None:
    """The workers' prune lists every worktree, a running task's too: a
    ``git status`` that refreshed the index would take its lock, and a
    capture committing at that moment failed ("remove the file manually")."""
    home = tmp_path / "home"
    tree = worktrees.prepare(repo, home, 5)
    later = time.time() + 5
    os.utime(tree.path / "lib.py", (later, later))  # stale stat data: a refreshing status would rewrite the index
    index = tree.git_dir / "index"
    before = index.stat()
    [listed] = worktrees.list_worktrees(home)
    assert not listed.dirty
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_expired_counts_days_since_the_worktree_last_changed(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 8)
    week_ago = time.time() - 8 * 86400
    os.utime(tree.path, (week_ago, week_ago))
    item = worktrees.info(tmp_path / "home", 8)
    assert item is not None
    assert worktrees.expired(item, keep_days=7)
    assert not worktrees.expired(item, keep_days=9)


def test_a_planted_git_file_never_runs_a_filter_on_the_host(repo: Path, tmp_path: Path) -> None:
    """A task may rewrite its worktree's .git to point at a git directory of
    its own whose config defines a filter (applied by a .gitattributes it
    wrote), a textconv, an fsmonitor command and a hook. The host inspects,
    captures, lists and removes the worktree only through the git directory
    it recorded, so none of them runs outside the confinement."""
    home = tmp_path / "home"
    tree = worktrees.prepare(repo, home, 9)
    marker = tmp_path / "planted-ran"
    subprocess.run(plant_argv(str(marker)), cwd=tree.path, check=True)
    changed = worktrees.changed_paths(tree)
    assert "lib.py" in changed and ".gitattributes" in changed
    worktrees.content_of(tree, changed)
    [listed] = worktrees.list_worktrees(home)
    assert (listed.repo, listed.branch, listed.dirty) == (repo, tree.branch, True)
    head = worktrees.capture(tree, "change the answer", changed)
    assert git(repo, "show", f"{head}:lib.py").endswith("# changed\n")
    worktrees.diffstat(tree, head)
    worktrees.cleanup(home, listed)
    assert not tree.path.exists()
    assert str(tree.path) not in git(repo, "worktree", "list")  # forgotten through the record
    assert not marker.exists()


def test_the_task_git_works_in_the_worktree_without_touching_the_owners_repository(repo: Path,
                                                                                   tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 11)
    owner_refs = git(repo, "for-each-ref")
    (tree.path / "lib.py").write_text("changed\n")
    git(tree.path, "add", "lib.py")
    git(tree.path, "commit", "-qm", "the task's own commit")
    assert git(tree.path, "log", "--format=%s", "main..").strip() == "the task's own commit"
    assert git(repo, "for-each-ref") == owner_refs
    assert worktrees.changed_paths(tree) == ["lib.py"]  # the files count, not the task's git


def test_capture_commits_only_the_validated_paths(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 10)
    (tree.path / "lib.py").write_text("def answer():\n    return 42  # changed\n")
    validated = worktrees.changed_paths(tree)
    (tree.path / "left-by-the-test-run.txt").write_text("not validated\n")
    head = worktrees.capture(tree, "change the answer", validated)
    committed = git(repo, "ls-tree", "-r", "--name-only", head).split()
    assert "lib.py" in committed and "left-by-the-test-run.txt" not in committed


def test_a_home_reached_through_a_symlink_still_knows_its_worktree_and_its_changes(repo: Path,
                                                                                  tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    home = tmp_path / "link" / "home"
    tree = worktrees.prepare(repo, home, 13)
    (tree.path / "lib.py").write_text("changed\n")
    assert tree.registered()
    [listed] = worktrees.list_worktrees(home)
    assert (listed.repo, listed.dirty) == (repo, True)
