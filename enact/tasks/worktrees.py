"""A task's git worktree: prepared from the target repository's authoritative
head, inspected, captured as one commit on the task's branch, removed or kept.

The authoritative branch is the branch the target repository has checked out
(its ``HEAD``): that is the branch its owner works on and the one a review
lands into. A repository on a detached ``HEAD`` is refused, since there would
be nothing to land into.

Every worktree lives under ``$ENACT_HOME/worktrees/task-<id>`` on the task's
branch (``enact.tasks.task_branches``). What the host made is written down
next to it, outside it (``task-<id>.json``: repository, owner-side git
directory, branches, base): the worktree, ``.git`` entry and all, is the
task's to write, so the host addresses it only through that record
(``enact.tasks.host_git``). Its ``.git`` is the task's own repository
(``enact.tasks.task_git``).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.home import WORKTREES_DIR
from enact.tasks import repositories, task_branches, task_git
from enact.tasks.host_git import WorktreeError, git

_SUBJECT_LIMIT = 72


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
    """The worktree's git directory in the owner's repository, read when it
    was made; the host never reads the worktree's ``.git``."""
    objects: Path
    """The owner repository's object store, which the task's own git reads."""

    def git(self, *args: str) -> str:
        """git in this worktree, through its recorded git directory."""
        return git(self.path, *args, options=(f"--git-dir={self.git_dir}", f"--work-tree={self.path}"))

    def registered(self) -> bool:
        """Whether the owner's repository still has this worktree's git
        directory, for this path (pruned and reused, it would be another's)."""
        try:
            back = (self.git_dir / "gitdir").read_text(encoding="utf-8").strip()
        except OSError:
            return False
        return Path(back) == self.path.resolve() / ".git"  # git writes the real path


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeInfo:
    task_id: int
    path: Path
    repo: Path | None
    branch: str
    dirty: bool
    modified_at: float


def worktrees_root(home: Path) -> Path:
    return home / WORKTREES_DIR


def path_of(home: Path, task_id: int) -> Path:
    return worktrees_root(home) / f"task-{task_id}"


def _record_path(home: Path, task_id: int) -> Path:
    return worktrees_root(home) / f"task-{task_id}.json"


def _write_record(home: Path, tree: Worktree) -> None:
    fields = {key: str(value) if isinstance(value, Path) else value for key, value in asdict(tree).items()}
    _record_path(home, tree.task_id).write_text(json.dumps(fields) + "\n", encoding="utf-8")


def recorded(home: Path, task_id: int) -> Worktree | None:
    """The worktree as the host made it, from its record."""
    try:
        data = json.loads(_record_path(home, task_id).read_text(encoding="utf-8"))
        return Worktree(task_id=int(data["task_id"]), path=Path(data["path"]), repo=Path(data["repo"]),
                        branch=str(data["branch"]), base_branch=str(data["base_branch"]), base=str(data["base"]),
                        git_dir=Path(data["git_dir"]), objects=Path(data["objects"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def authoritative_head(repo: Path) -> tuple[str, str]:
    """The repository's checked-out branch and its head commit
    (``enact.tasks.repositories`` says why there is none)."""
    found = repositories.checkout(repo)
    return found.branch, found.head


def prepare(repo: Path, home: Path, task_id: int) -> Worktree:
    """A fresh worktree for the task from the repository's authoritative
    head, with the task's own git in it. One left by an earlier attempt of
    the same task (its worker died) is replaced: its work was never
    captured. The task's branch is reset only if this home made it."""
    found = repositories.checkout(repo)
    repo, base_branch, base = found.top, found.branch, found.head
    path = path_of(home, task_id)
    _remove_leftover(home, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "prune")
    branch, existed = task_branches.claim(home, repo, task_id)
    # Forced twice: an entry for this path that a home made afresh (or a
    # crash) left registered is locked (below) and its directory gone;
    # nothing else of ours is at this path (the leftover was just removed).
    git(repo, "worktree", "add", "--quiet", "-f", "-f", "-B" if existed else "-b", branch, str(path), base)
    # Read now, before the task runs: afterwards nothing in the worktree is the host's to trust.
    git_dir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
    tree = Worktree(task_id=task_id, path=path, repo=repo, branch=branch, base_branch=base_branch, base=base,
                    git_dir=git_dir, objects=task_git.objects_dir(repo))
    # Locked before its ``.git`` file is replaced: in between the file is
    # gone, and another worker's ``git worktree prune`` would take the
    # owner-side directory this worktree is addressed through (seen with two
    # workers: git then ran outside any repository).
    (git_dir / "locked").write_text("an enact task's worktree\n", encoding="utf-8")
    _write_record(home, tree)
    task_git.make_private(path, objects=tree.objects, branch=branch, base_branch=base_branch, base=base)
    return tree


def _remove_leftover(home: Path, task_id: int) -> None:
    leftover = recorded(home, task_id)
    if leftover is not None:
        _remove_path(leftover.repo, leftover.path, leftover.git_dir)
    path = path_of(home, task_id)
    if path.exists():
        shutil.rmtree(path)
    _record_path(home, task_id).unlink(missing_ok=True)


def _split_z(output: str) -> list[str]:
    return [item for item in output.split("\0") if item]


def changed_paths(worktree: Worktree) -> list[str]:
    """Every path whose file differs from the base: edited, added, deleted
    or renamed; sorted. The files are what counts, whatever the task did
    with its own git."""
    tracked = _split_z(worktree.git("diff", "--name-only", "-z", "--no-renames", worktree.base))
    untracked = _split_z(worktree.git("ls-files", "--others", "--exclude-standard", "-z"))
    return sorted(set(tracked) | set(untracked))


def content_of(worktree: Worktree, paths: list[str]) -> dict[str, str]:
    """Each path's content hash (``gone`` for a deleted one): what was
    validated, to hold the commit to it."""
    hashes = {}
    for relative in paths:
        file = worktree.path / relative
        # As the file is, unfiltered: the hashes are only compared with each other.
        hashes[relative] = worktree.git("hash-object", "--no-filters", "--", relative).strip() \
            if file.is_file() else "gone"
    return hashes


def commit_subject(task_id: int, request: str) -> str:
    first = request.strip().splitlines()[0] if request.strip() else "no request text"
    subject = f"enact task {task_id}: {first}"
    return subject if len(subject) <= _SUBJECT_LIMIT else subject[: _SUBJECT_LIMIT - 1] + "…"


def capture(worktree: Worktree, request: str, paths: list[str]) -> str:
    """Commit the validated ``paths`` on the task branch (nothing the test
    run left behind), as the work tree has them; the head commit."""
    if paths:
        worktree.git("add", "--all", "--", *paths)
    staged = worktree.git("diff", "--cached", "--name-only").strip()
    if staged:
        body = f"{request.strip()}\n\nTask {worktree.task_id}, from {worktree.base_branch} at {worktree.base[:12]}."
        worktree.git("commit", "--quiet", "--no-verify", "-m", commit_subject(worktree.task_id, request),
                     "-m", body)
    return worktree.git("rev-parse", "HEAD").strip()


def diffstat(worktree: Worktree, head: str) -> str:
    return worktree.git("diff", "--stat", "--no-textconv", "--no-ext-diff", worktree.base, head).strip()


def remove(worktree: Worktree, home: Path, *, delete_branch: bool) -> None:
    """Remove the worktree and its record; with ``delete_branch`` also its
    branch (nothing on it is wanted: the task made no change)."""
    _remove_path(worktree.repo, worktree.path, worktree.git_dir)
    _record_path(home, worktree.task_id).unlink(missing_ok=True)
    if delete_branch:
        task_branches.release(home, worktree.task_id, branch=worktree.branch)


def _remove_path(repo: Path | None, path: Path, git_dir: Path | None) -> None:
    """Delete the directory, unlock its owner-side git directory (recorded
    when it was made), then have the repository forget worktrees whose
    directories are gone: ``git worktree remove`` would read the
    worktree's ``.git``, which is the task's."""
    if path.exists():
        shutil.rmtree(path)
    if git_dir is not None:
        (git_dir / "locked").unlink(missing_ok=True)
    if repo is not None and repo.is_dir():
        git(repo, "worktree", "prune")


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
    tree = recorded(home, task_id)
    dirty = False  # without a record (or registration) git is not asked: nothing in it is tracked
    if tree is not None and tree.path == path and tree.registered():
        try:
            dirty = bool(tree.git("status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all")
                         .strip())
        except WorktreeError:
            dirty = False
    return WorktreeInfo(task_id=task_id, path=path, repo=tree.repo if tree else None,
                        branch=tree.branch if tree else "", dirty=dirty, modified_at=path.stat().st_mtime)


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


def cleanup(home: Path, item: WorktreeInfo) -> None:
    """Remove a kept worktree and its record; its branch stays (a review may still name it)."""
    made = recorded(home, item.task_id)
    _remove_path(item.repo, item.path, made.git_dir if made is not None else None)
    _record_path(home, item.task_id).unlink(missing_ok=True)


def expired(item: WorktreeInfo, *, keep_days: float, now: float | None = None) -> bool:
    return ((now if now is not None else time.time()) - item.modified_at) > keep_days * 86400
