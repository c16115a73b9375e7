"""Branches on the task repositories (``tests.task_repos``), as a worker
captures them, for the review and landing tests."""

from __future__ import annotations

from pathlib import Path

import task_repos


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``: its output, stripped."""
    return task_repos.git(repo, *args).strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "--", *files)
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path, *, doctor: str = "test -f ok") -> Path:
    """A task repository (``tests.task_repos``) whose doctor runs ``doctor``;
    by default it passes while a file ``ok`` exists, and ``app.txt`` is there
    to change."""
    return task_repos.make_repo(path, doctor=doctor, files={"ok": "", "app.txt": "one\n"})


def task_branch(repo: Path, branch: str, files: dict[str, str], *, deleted: tuple[str, ...] = ()) -> tuple[str, str]:
    """A branch from ``main`` with one commit, as a worker captures it, made
    without touching the repository's checkout; returns (base, head)."""
    base = git(repo, "rev-parse", "main")
    worktree = repo.parent / f"wt-{branch.replace('/', '-')}"
    git(repo, "worktree", "add", "--quiet", "-b", branch, str(worktree), base)
    for name in deleted:
        git(worktree, "rm", "--quiet", name)
    if files:
        commit(worktree, files, f"{branch}: change")
    else:
        git(worktree, "commit", "--quiet", "-m", f"{branch}: change")
    head = git(worktree, "rev-parse", "HEAD")
    git(repo, "worktree", "remove", "--force", str(worktree))
    return base, head
