"""The task's own git: a private repository in its worktree's ``.git``.

The worktree git made for a task is addressed through the owner
repository's ``worktrees/<name>``, which a confined task can only read: its
index, ``HEAD`` and refs cannot change, so ``git add``, ``stash`` or
``checkout --`` fail inside. The host instead puts a repository of the
task's own in place of the ``.git`` file: its objects are the owner's,
through ``objects/info/alternates`` (read-only; what the task writes lands
in the private object store), and it has its own index, ``HEAD`` on the
task's real branch name, and the base branch, both at the base commit.

The host never runs git with this directory: everything the task does to
it is the task's. The host's git keeps using the owner-side git directory
it recorded and captures the change from the work tree's files.
"""

from __future__ import annotations

from pathlib import Path

from enact.tasks.host_git import AUTHOR, git


def own_git_dir(worktree: Path) -> Path:
    """The task's own git directory in ``worktree`` (``make_private``): its
    to write, even where a runtime's sandbox keeps a ``.git`` read-only."""
    return worktree / ".git"


def objects_dir(repo: Path) -> Path:
    """The owner repository's object store, which the task's git reads."""
    common = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    return Path(common) / "objects"


def make_private(path: Path, *, objects: Path, branch: str, base_branch: str, base: str) -> Path:
    """Replace the worktree's ``.git`` file by the task's own repository;
    its git directory. Run before the task starts: nothing in it is the
    task's yet."""
    dot_git = own_git_dir(path)
    dot_git.unlink()
    git(path, "init", "--quiet", "--template=", str(path))
    (dot_git / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (dot_git / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
    own = ("--git-dir", str(dot_git), "--work-tree", str(path))
    name, email = AUTHOR
    for key, value in (("user.name", f"{name} task"), ("user.email", email)):
        git(path, "config", key, value, options=own)
    git(path, "update-ref", f"refs/heads/{base_branch}", base, options=own)
    git(path, "update-ref", f"refs/heads/{branch}", base, options=own)
    git(path, "symbolic-ref", "HEAD", f"refs/heads/{branch}", options=own)
    git(path, "reset", "--quiet", options=own)  # the index, so status starts clean
    return dot_git
