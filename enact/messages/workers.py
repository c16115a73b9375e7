"""The task workers' protocol (actor ``workers``): the worktrees they keep,
and the wake-ups that tell a worker to claim."""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import NotFound, Origin, Refused


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeEntry:
    task_id: int
    path: str
    repo: str
    branch: str
    dirty: bool
    """Uncommitted changes in it."""
    task_state: str
    """The task's state, or "" when the queue has no such task."""
    modified_at: float


@request("workers.ListWorktrees")
@dataclass(frozen=True, slots=True, kw_only=True)
class ListWorktrees(Request["WorktreeList"]):
    """Every task worktree under ``$ENACT_HOME/worktrees``, by task id."""


@reply("workers.WorktreeList")
@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeList:
    worktrees: tuple[WorktreeEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteWorker:
    worker_id: str
    task_id: int
    node: str
    """Where the attempt runs: the node's host name and address and the
    worker process; "" while it waits for a node."""
    since: float


@request("workers.RemoteWorkers")
@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteWorkers(Request["RemoteWorkerList"]):
    """The workers whose attempts run on the Ray cluster now (``tasks.backend = "ray"``), with their nodes."""


@reply("workers.RemoteWorkerList")
@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteWorkerList:
    workers: tuple[RemoteWorker, ...]


@request("workers.CleanupWorktree")
@dataclass(frozen=True, slots=True, kw_only=True)
class CleanupWorktree(Request["CleanedUp | NotFound | Refused"]):
    """Remove a kept worktree, and its branch when that is orphaned (no open
    review names the task). Refused while its task is queued, running or
    paused, and with uncommitted changes unless ``force``."""

    task_id: int
    force: bool = False
    origin: Origin = ""


@reply("workers.CleanedUp")
@dataclass(frozen=True, slots=True, kw_only=True)
class CleanedUp:
    task_id: int
    path: str
    branch: str = ""
    """The task's branch, when it was orphaned and deleted too."""


@request("workers.CleanupBranches")
@dataclass(frozen=True, slots=True, kw_only=True)
class CleanupBranches(Request["BranchesCleanedUp | Refused"]):
    """Delete this home's orphaned task branches: those whose task is gone
    or ended and has neither a kept worktree nor an open review. Only on a
    human's word."""

    origin: Origin = ""


@reply("workers.BranchesCleanedUp")
@dataclass(frozen=True, slots=True, kw_only=True)
class BranchesCleanedUp:
    removed: tuple[str, ...]
    """Each as ``<repository> <branch>``."""
    failed: tuple[str, ...] = ()
    """Why a branch could not be deleted, one line each."""


@internal("workers.Poll")
@dataclass(frozen=True, slots=True, kw_only=True)
class Poll:
    """Claim a task if one is queued. ``sent_at`` (monotonic): a wake-up sent
    before the worker's latest claim is stale and dropped."""

    sent_at: float
    timer: bool = False
    """Sent by the worker's own idle timer."""


@internal("workers.PruneWorktrees")
@dataclass(frozen=True, slots=True, kw_only=True)
class PruneWorktrees:
    """The workers' own timer: remove kept worktrees past ``tasks.keep_failed_worktrees_days``."""
