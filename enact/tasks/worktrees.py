"""A task's git worktree: prepared from the target repository's authoritative
head, inspected, captured as one commit on the task's branch, removed or kept.

The authoritative branch is the branch the target repository has checked out
(its ``HEAD``): that is the branch its owner works on and the one a review
lands into. A repository on a detached ``HEAD`` is refused, since there would
be nothing to land into.

Every worktree lives under ``$ENACT_HOME/worktrees/task-<id>`` on branch
``enact/task-<id>``; git runs through ``sh``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sh

from enact.home import WORKTREES_DIR
from enact.home_guard import as_owner

BRANCH_PREFIX = "enact/task-"
AUTHOR = ("enact", "enact@localhost")
_SUBJECT_LIMIT = 72


class WorktreeError(Exception):
    """A git operation on a task's worktree failed; the message is one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Worktree:
    task_id: int
    path: Path
    repo: Path
    branch: str
    base_branch: str
    base: str
    """The commit the worktree was made from."""
    git_dir: Path
    """The worktree's git directory, read when it was made: the ``.git``
    file inside is the task's to write, so the host never trusts it."""

    def git(self, *args: str) -> str:
        """git in this worktree, with its own git directory and no hooks."""
        return git(self.path, *args, options=(f"--git-dir={self.git_dir}", f"--work-tree={self.path}",
                                              *SAFE_OPTIONS))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeInfo:
    task_id: int
    path: Path
    repo: Path | None
    branch: str
    dirty: bool
    modified_at: float


def branch_of(task_id: int) -> str:
    return f"{BRANCH_PREFIX}{task_id}"


def worktrees_root(home: Path) -> Path:
    return home / WORKTREES_DIR


def path_of(home: Path, task_id: int) -> Path:
    return worktrees_root(home) / f"task-{task_id}"


def _git_env() -> dict[str, str]:
    # The daemon's own environment must not point git elsewhere (a GIT_DIR
    # inherited from a hook, say), and commits need an identity even where
    # the owner configured none.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    name, email = AUTHOR
    env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
               GIT_COMMITTER_EMAIL=email, GIT_TERMINAL_PROMPT="0")
    return env


SAFE_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
"""For git run by the host in a worktree a task's runtime could write: no
hook and no fsmonitor command it might have planted runs outside the
confinement."""


def git(cwd: Path, *args: str, options: tuple[str, ...] = ()) -> str:
    """Run ``git [OPTIONS] ARGS`` in ``cwd``; its standard output, or WorktreeError."""
    try:
        output = sh.git(*options, *args, _cwd=str(cwd), _env=_git_env(), _tty_out=False, _preexec_fn=as_owner)
    except sh.ErrorReturnCode as error:
        detail = error.stderr.decode(errors="replace").strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed in {cwd}: {detail[-1] if detail else error.exit_code}") from None
    except sh.CommandNotFound:
        raise WorktreeError("git is not installed") from None
    return str(output)


def authoritative_head(repo: Path) -> tuple[str, str]:
    """The repository's checked-out branch and its head commit."""
    if not repo.is_dir():
        raise WorktreeError(f"{repo} is not a directory")
    try:
        branch = git(repo, "symbolic-ref", "--short", "-q", "HEAD").strip()
    except WorktreeError:
        git(repo, "rev-parse", "--git-dir")  # names "not a git repository" when that is the cause
        raise WorktreeError(f"{repo} has a detached HEAD: check out the branch tasks should land into") from None
    head = git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}").strip()
    if not head:
        raise WorktreeError(f"{repo}: branch {branch} has no commit yet")
    return branch, head


def prepare(repo: Path, home: Path, task_id: int) -> Worktree:
    """A fresh worktree for the task from the repository's authoritative
    head. One left by an earlier attempt of the same task (its worker died)
    is replaced: its work was never captured."""
    repo = Path(git(repo, "rev-parse", "--show-toplevel").strip()) if repo.is_dir() else repo
    base_branch, base = authoritative_head(repo)
    path = path_of(home, task_id)
    branch = branch_of(task_id)
    if path.exists():
        _remove_path(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "prune")
    git(repo, "worktree", "add", "--quiet", "-B", branch, str(path), base)
    git_dir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
    return Worktree(task_id=task_id, path=path, repo=repo, branch=branch, base_branch=base_branch, base=base,
                    git_dir=git_dir)


def _split_z(output: str) -> list[str]:
    return [item for item in output.split("\0") if item]


def changed_paths(worktree: Worktree) -> list[str]:
    """Every path that differs from the base: edited, added, deleted or
    renamed, committed by the runtime or not; sorted."""
    tracked = _split_z(worktree.git("diff", "--name-only", "-z", "--no-renames", worktree.base))
    untracked = _split_z(worktree.git("ls-files", "--others", "--exclude-standard", "-z"))
    return sorted(set(tracked) | set(untracked))


def content_of(worktree: Worktree, paths: list[str]) -> dict[str, str]:
    """Each path's content hash (``gone`` for a deleted one): what was
    validated, to hold the commit to it."""
    hashes = {}
    for relative in paths:
        file = worktree.path / relative
        hashes[relative] = worktree.git("hash-object", "--", relative).strip() if file.is_file() else "gone"
    return hashes


def commit_subject(task_id: int, request: str) -> str:
    first = request.strip().splitlines()[0] if request.strip() else "no request text"
    subject = f"enact task {task_id}: {first}"
    return subject if len(subject) <= _SUBJECT_LIMIT else subject[: _SUBJECT_LIMIT - 1] + "…"


def capture(worktree: Worktree, request: str, paths: list[str]) -> str:
    """Commit the validated ``paths`` on the task branch (nothing the test
    run left behind); the head commit. Changes the runtime committed itself
    stay as they are."""
    if paths:
        worktree.git("add", "--all", "--", *paths)
    staged = worktree.git("diff", "--cached", "--name-only").strip()
    if staged:
        body = f"{request.strip()}\n\nTask {worktree.task_id}, from {worktree.base_branch} at {worktree.base[:12]}."
        worktree.git("commit", "--quiet", "--no-verify", "-m", commit_subject(worktree.task_id, request),
                     "-m", body)
    return worktree.git("rev-parse", "HEAD").strip()


def diffstat(worktree: Worktree, head: str) -> str:
    return worktree.git("diff", "--stat", worktree.base, head).strip()


def remove(worktree: Worktree, *, delete_branch: bool) -> None:
    """Remove the worktree; with ``delete_branch`` also its branch (nothing
    on it is wanted: the task made no change)."""
    _remove_path(worktree.repo, worktree.path)
    if delete_branch:
        git(worktree.repo, "branch", "-D", "--quiet", worktree.branch)


def _remove_path(repo: Path | None, path: Path) -> None:
    if repo is not None and repo.is_dir():
        # Not (or no longer) registered: the directory is removed below.
        with contextlib.suppress(WorktreeError):
            git(repo, "worktree", "remove", "--force", "--force", str(path))
    if path.exists():
        shutil.rmtree(path)
    if repo is not None and repo.is_dir():
        git(repo, "worktree", "prune")


def repo_of(path: Path) -> Path | None:
    """The repository a worktree belongs to, from its ``.git`` file
    (``gitdir: <repo>/.git/worktrees/<name>``); None if it is not one."""
    try:
        line = (path / ".git").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line.removeprefix("gitdir:").strip())
    # <repo>/.git/worktrees/<name> -> <repo>
    return gitdir.parent.parent.parent if gitdir.parent.name == "worktrees" else None


def _task_dirs(home: Path) -> Iterator[tuple[int, Path]]:
    root = worktrees_root(home)
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        number = entry.name.removeprefix("task-")
        if entry.is_dir() and entry.name.startswith("task-") and number.isdigit():
            yield int(number), entry


def info(home: Path, task_id: int) -> WorktreeInfo | None:
    path = path_of(home, task_id)
    if not path.is_dir():
        return None
    try:
        dirty = bool(git(path, "status", "--porcelain", "--untracked-files=all", options=SAFE_OPTIONS).strip())
    except WorktreeError:
        dirty = False  # not a worktree git knows any more: nothing in it is tracked
    return WorktreeInfo(task_id=task_id, path=path, repo=repo_of(path), branch=branch_of(task_id),
                        dirty=dirty, modified_at=path.stat().st_mtime)


def list_worktrees(home: Path) -> list[WorktreeInfo]:
    found = (info(home, task_id) for task_id, _ in _task_dirs(home))
    return sorted((item for item in found if item is not None), key=lambda item: item.task_id)


def cleanup_refusal(item: WorktreeInfo, *, task_state: str | None, force: bool) -> str | None:
    """Why the worktree may not be removed now, or None. A task that is
    queued, running or paused will use it again; uncommitted changes are
    someone's work unless ``force`` says otherwise."""
    if task_state in ("queued", "running", "paused"):
        return f"task {item.task_id} is {task_state} and uses {item.path}"
    if item.dirty and not force:
        return f"{item.path} has uncommitted changes; use --force to remove it anyway"
    return None


def cleanup(item: WorktreeInfo) -> None:
    """Remove a kept worktree; its branch stays (a review may still name it)."""
    _remove_path(item.repo, item.path)


def expired(item: WorktreeInfo, *, keep_days: float, now: float | None = None) -> bool:
    return ((now if now is not None else time.time()) - item.modified_at) > keep_days * 86400
