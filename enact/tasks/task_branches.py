"""The task branches a home makes in its owner's repositories.

Each home has an id of its own (``$ENACT_HOME/home-id``, made on first use),
and its task branches are ``enact/<home id>/task-<task id>``: two homes on one
repository, or a home made afresh where an old one was, never name the same
branch. Each branch a home makes is written down in its ledger
(``$ENACT_HOME/branches/task-<id>.json``: repository and branch) before it is
made; a branch the ledger does not name is never reset or deleted, whoever
made it. A branch goes when its review is landed or closed, or when it is
orphaned (``orphaned``): its task has no worktree and no open review left.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import string
from collections.abc import Iterator
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.tasks.host_git import WorktreeError, git

HOME_ID_FILE = "home-id"
LEDGER_DIR = "branches"
_HOME_ID_LENGTH = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskBranch:
    task_id: int
    repo: Path
    branch: str


def home_id(home: Path) -> str:
    """This home's id, made (and kept) by the first caller."""
    path = home / HOME_ID_FILE
    with contextlib.suppress(FileNotFoundError):
        return _valid_id(path)
    home.mkdir(parents=True, exist_ok=True)
    # Written whole under a name of its own, then linked into place: a
    # worker starting at the same moment finds either no id or the whole
    # one, and the first link wins.
    draft = home / f".{HOME_ID_FILE}.{secrets.token_hex(8)}"
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(secrets.token_hex(_HOME_ID_LENGTH // 2) + "\n")
    try:
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()
    return _valid_id(path)


def _valid_id(path: Path) -> str:
    text = path.read_text(encoding="ascii").strip()
    if len(text) != _HOME_ID_LENGTH or not set(text) <= set(string.hexdigits.lower()):
        raise WorktreeError(f"{path} does not hold a home id ({_HOME_ID_LENGTH} hex digits)")
    return text


def branch_of(home: Path, task_id: int) -> str:
    return f"enact/{home_id(home)}/task-{task_id}"


def _ledger_path(home: Path, task_id: int) -> Path:
    return home / LEDGER_DIR / f"task-{task_id}.json"


def recorded(home: Path, task_id: int) -> TaskBranch | None:
    """The branch this home made for the task, as its ledger says."""
    try:
        data = json.loads(_ledger_path(home, task_id).read_text(encoding="utf-8"))
        return TaskBranch(task_id=task_id, repo=Path(data["repo"]), branch=str(data["branch"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ledger(home: Path) -> Iterator[TaskBranch]:
    root = home / LEDGER_DIR
    if not root.is_dir():
        return
    for entry in sorted(root.glob("task-*.json")):
        number = entry.name.removeprefix("task-").removesuffix(".json")
        found = recorded(home, int(number)) if number.isdigit() else None
        if found is not None:
            yield found


def exists(repo: Path, branch: str) -> bool:
    try:
        git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except WorktreeError:
        return False
    return True


def claim(home: Path, repo: Path, task_id: int) -> tuple[str, bool]:
    """The task's branch in ``repo`` and whether it exists already (an
    earlier attempt of the task made it, so it may be reset). A branch of
    that name this home's ledger does not name for this task and repository
    is refused: it is someone else's work."""
    branch = branch_of(home, task_id)
    ours = recorded(home, task_id) == TaskBranch(task_id=task_id, repo=repo, branch=branch)
    if exists(repo, branch):
        if not ours:
            raise WorktreeError(f"branch {branch} already exists in {repo} and this home did not make it; "
                                "it is left as it is")
        return branch, True
    # Written before the branch is made: a crash in between leaves an entry
    # whose branch is missing, which ``release`` clears.
    path = _ledger_path(home, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"repo": str(repo), "branch": branch}) + "\n", encoding="utf-8")
    return branch, False


def release(home: Path, task_id: int, *, branch: str | None = None) -> TaskBranch | None:
    """Delete the task's branch, if this home's ledger names it (and it is
    ``branch``, when given), and its ledger entry; what was deleted. A branch
    still checked out in a worktree stays (WorktreeError)."""
    found = recorded(home, task_id)
    if found is None or (branch is not None and found.branch != branch):
        return None
    if found.repo.is_dir() and exists(found.repo, found.branch):
        git(found.repo, "branch", "-D", "--quiet", found.branch)
    _ledger_path(home, task_id).unlink(missing_ok=True)
    return found


def orphaned(*, task_state: str, has_worktree: bool, review_state: str) -> bool:
    """Whether a task's branch is nobody's any more: the task is gone
    (``task_state`` empty) or ended, it has no kept worktree and its review,
    if any, is not open."""
    if has_worktree or review_state == "open":
        return False
    return task_state not in ("queued", "running", "paused")
