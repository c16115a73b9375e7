"""Task worktrees on real git repositories made by the test."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from task_repos import git, make_repo

from enact.tasks import worktrees
from enact.tasks.worktrees import WorktreeError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_prepare_branches_from_the_checked_out_branch_head(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "-b", "work")
    (repo / "lib.py").write_text("def answer():\n    return 43\n")
    git(repo, "commit", "-qam", "on work")
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = worktrees.prepare(repo, tmp_path / "home", 7)
    assert tree.path == tmp_path / "home" / "worktrees" / "task-7"
    assert (tree.branch, tree.base_branch, tree.base) == ("enact/task-7", "work", head)
    assert git(tree.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "enact/task-7"
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


def test_changed_paths_see_edits_new_files_deletions_and_runtime_commits(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 1)
    assert worktrees.changed_paths(tree) == []
    (tree.path / "lib.py").write_text("changed\n")
    (tree.path / "new dir").mkdir()
    (tree.path / "new dir" / "n.txt").write_text("n\n")
    (tree.path / "tests" / "test_lib.py").unlink()
    (tree.path / "__pycache__").mkdir()
    (tree.path / "__pycache__" / "x.pyc").write_text("")
    assert worktrees.changed_paths(tree) == ["lib.py", "new dir/n.txt", "tests/test_lib.py"]
    git(tree.path, "commit", "-qam", "the runtime committed")
    assert worktrees.changed_paths(tree) == ["lib.py", "new dir/n.txt", "tests/test_lib.py"]


def test_capture_commits_on_the_task_branch_naming_the_task(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 12)
    (tree.path / "lib.py").write_text("def answer():\n    return 42  # checked\n")
    head = worktrees.capture(tree, "Mark the answer as checked\nmore words", worktrees.changed_paths(tree))
    assert git(repo, "rev-parse", "enact/task-12").strip() == head
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
    worktrees.remove(tree, delete_branch=True)
    assert not tree.path.exists()
    assert "enact/task-4" not in git(repo, "branch", "--list")
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
    worktrees.cleanup(six)
    assert not dirty.path.exists() and clean.path.exists()
    assert "enact/task-6" in git(repo, "branch", "--list")  # a review may still name it


def test_expired_counts_days_since_the_worktree_last_changed(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 8)
    week_ago = time.time() - 8 * 86400
    os.utime(tree.path, (week_ago, week_ago))
    item = worktrees.info(tmp_path / "home", 8)
    assert item is not None
    assert worktrees.expired(item, keep_days=7)
    assert not worktrees.expired(item, keep_days=9)


def test_the_host_never_follows_a_git_file_the_task_rewrote(repo: Path, tmp_path: Path) -> None:
    """A task may write its worktree's .git file: pointed at a git directory
    of its own, with an fsmonitor command and a post-commit hook, it would
    have the host's git run them unconfined. The host uses the git directory
    it read when it made the worktree, with hooks and fsmonitor off."""
    tree = worktrees.prepare(repo, tmp_path / "home", 9)
    planted = tmp_path / "planted-ran"
    fake = tree.path / "fakegit"
    git(tmp_path, "init", "-q", "--bare", str(fake))
    git(fake, "config", "core.fsmonitor", f"touch {planted}")
    (fake / "hooks" / "post-commit").write_text(f"#!/bin/sh\ntouch {planted}\n")
    (fake / "hooks" / "post-commit").chmod(0o755)
    (tree.path / ".git").write_text(f"gitdir: {fake}\n")
    (tree.path / "lib.py").write_text("def answer():\n    return 42  # changed\n")
    changed = worktrees.changed_paths(tree)
    assert "lib.py" in changed
    head = worktrees.capture(tree, "change the answer", ["lib.py"])
    assert not planted.exists()
    assert git(repo, "show", f"{head}:lib.py").endswith("# changed\n")
    assert not any(name.startswith("fakegit") for name in git(repo, "ls-tree", "-r", "--name-only", head).split())


def test_capture_commits_only_the_validated_paths(repo: Path, tmp_path: Path) -> None:
    tree = worktrees.prepare(repo, tmp_path / "home", 10)
    (tree.path / "lib.py").write_text("def answer():\n    return 42  # changed\n")
    validated = worktrees.changed_paths(tree)
    (tree.path / "left-by-the-test-run.txt").write_text("not validated\n")
    head = worktrees.capture(tree, "change the answer", validated)
    committed = git(repo, "ls-tree", "-r", "--name-only", head).split()
    assert "lib.py" in committed and "left-by-the-test-run.txt" not in committed
