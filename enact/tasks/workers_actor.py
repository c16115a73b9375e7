"""Task workers: a pool of ``daemon.workers`` worker actors, and ``workers``,
the actor that starts them, wakes them when a task is queued and keeps the
task worktrees (list, clean up, prune).

A worker's attempt (``enact.tasks.worker``) runs off its thread
(``off_thread``), its heartbeats on a thread of their own; the worker claims
again once the attempt has ended. A stop cancels the attempt and waits for
it to hand its task back.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.actors._pool import KeyedPool
from enact.actors._specs import ActorSpec
from enact.cancellation import CancellationToken
from enact.config import DaemonSettings, RuntimeSettings
from enact.messages.common import NotFound, RefusalCode, Refused, is_human
from enact.messages.reviews import List as ListReviews
from enact.messages.tasks import Claim, Claimed, Found, Get, NothingQueued, TaskChanged
from enact.messages.workers import (
    BranchesCleanedUp,
    CleanedUp,
    CleanupBranches,
    CleanupWorktree,
    ListWorktrees,
    Poll,
    PruneWorktrees,
    RemoteWorkerList,
    RemoteWorkers,
    WorktreeEntry,
    WorktreeList,
)
from enact.runtime import Runtime
from enact.tasks import task_branches, worktrees
from enact.tasks.host_git import WorktreeError
from enact.tasks.metrics import TasksMetrics
from enact.tasks.records import DEADLINE_RANGE_S, EventKind, TaskState
from enact.tasks.remote_attempt import remote_workers
from enact.tasks.settings import TasksSettings
from enact.tasks.validation import remove_leftovers
from enact.tasks.worker import TaskAttempt, WorkerServices

log = logging.getLogger(__name__)

FAMILY = "worker"
IDLE_POLL_S = 2.0
"""An idle worker claims at least this often: a wake-up may be missed (the
queue restarting), and a retried task becomes due without an event."""
PRUNE_EVERY_S = 3_600.0
_WAKING_EVENTS = frozenset({EventKind.QUEUED, EventKind.LEASE_EXPIRED, EventKind.RETRYING, EventKind.RESUMED,
                            EventKind.INTERRUPTED})
_NEVER_IDLE_S = 365 * 86400.0
"""Workers are not retired when idle: each waits for work."""


class WorkerActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime, worker_id: str) -> None:
        super().__init__(context)
        self._services = WorkerServices(home=context.home, settings=context.config.typed(TasksSettings),
                                        call_timeout_s=context.config.typed(RuntimeSettings).timeout_s,
                                        runtime=runtime, ask=context.ask)
        self._remote = self._services.settings.backend == "ray"
        """Whether its attempts run on the Ray cluster (``enact.tasks.ray_backend``)."""
        self._worker_id = worker_id
        self._last_claim = 0.0
        self._timer_pending = False
        self._running: int | None = None
        """The task whose attempt runs now."""

    def on_start(self) -> None:
        # Also after a restart: nobody else would wake this worker. Its own
        # ref, since it is not addressable by name until on_start returns.
        self.actor_ref.tell(Poll(sent_at=self.context.clock.monotonic()))

    def on_stop(self) -> None:
        self.cancel_timers()
        super().on_stop()

    def handle(self, message: Any) -> Any:
        match message:
            case Poll():
                return self._poll(message)
        return super().handle(message)

    def _poll(self, message: Poll) -> None:
        if message.timer:
            self._timer_pending = False
        if message.sent_at < self._last_claim or self._running is not None or self.context.supervisor.stopping:
            return  # stale (this worker claimed since it was sent), or busy: it claims again when done
        self._last_claim = self.context.clock.monotonic()
        claimed = self.context.ask("tasks", Claim(worker_id=self._worker_id))
        if isinstance(claimed, NothingQueued):
            self._poll_later(claimed.next_due_in_s)
            return
        self._run(claimed)

    def _poll_later(self, due_in_s: float | None) -> None:
        if self._timer_pending:
            return
        self._timer_pending = True
        delay = IDLE_POLL_S if due_in_s is None else max(0.05, min(IDLE_POLL_S, due_in_s))
        self.tell_later(delay, Poll(sent_at=self.context.clock.monotonic() + delay, timer=True))

    def _run(self, claimed: Claimed) -> None:
        task = claimed.task
        log.info("%s runs task %d (attempt %d)", self._worker_id, task.id, task.attempt)
        self._running = task.id
        # The attempt's cancel is the work's: a graceful stop hands the task
        # back (interrupted), and the stop waits for that.
        worker_time = self.context.metrics.of(TasksMetrics).worker_time

        def attempt(cancel: CancellationToken) -> None:
            with worker_time.busy():  # on the attempt's thread: counted until it returns, however it ends
                if self._remote:
                    from enact.tasks.ray_backend import RayAttempt  # Ray is imported by this backend only

                    RayAttempt(claimed, worker_id=self._worker_id, services=self._services,
                               config=self.context.config, parent=cancel, fence=self.context.fence.token,
                               may_write=self.context.fence.is_current).run()
                    return
                TaskAttempt(claimed, worker_id=self._worker_id, services=self._services, parent=cancel,
                            fence=self.context.fence.token).run()

        self.off_thread(attempt, then=self._ended, name=f"task-{task.id}", stop_waits=True)

    def _ended(self, _: None) -> None:
        self._running = None
        self.context.tell(self.context.name, Poll(sent_at=self.context.clock.monotonic()))


class WorkersActor(EnactActor):
    """Starts the pool, wakes it on ``tasks.TaskChanged``, keeps the worktrees;
    on the Ray backend, its stop (after its workers') ends the daemon's mailbox actor."""

    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self._runtime = runtime
        self._settings = context.config.typed(TasksSettings)
        self._count = (self._settings.ray_workers if self._settings.backend == "ray"
                       else context.config.typed(DaemonSettings).workers)
        self._pool: KeyedPool | None = None

    def _spec_of(self, key: str) -> ActorSpec:
        worker_id = f"{FAMILY}:{key}@g{self.context.fence.generation}"
        return ActorSpec(name=f"{FAMILY}:{key}", actor=WorkerActor,
                         options={"runtime": self._runtime, "worker_id": worker_id})

    def on_start(self) -> None:
        # Base runs a crash cut short; a live one is younger than the
        # longest a task's deadline or twice a doctor's timeout allow.
        remove_leftovers(self.context.home, older_than_s=max(
            float(DEADLINE_RANGE_S[1]), 2 * self._settings.doctor_timeout_s))
        pool = self._pool = self.context.supervisor.pool(FAMILY, self._spec_of, idle_s=_NEVER_IDLE_S)
        self.context.metrics.of(TasksMetrics).workers.set(self._count)
        for index in range(self._count):
            pool.tell(str(index), f"{FAMILY}-{index}", Poll(sent_at=self.context.clock.monotonic()))
        self.tell_later(1.0, PruneWorktrees())

    def on_stop(self) -> None:
        self.cancel_timers()
        ray_mailbox = sys.modules.get("enact.tasks.ray_mailbox")  # imported once an attempt went to the cluster
        if ray_mailbox is not None:
            ray_mailbox.stop_mailbox()
        super().on_stop()

    def handle(self, message: Any) -> Any:
        match message:
            case TaskChanged():
                if message.task.state is TaskState.QUEUED and message.event.event.kind in _WAKING_EVENTS:
                    self._wake()
                return None
            case ListWorktrees():
                return WorktreeList(worktrees=tuple(self._entry(item) for item in
                                                    worktrees.list_worktrees(self.context.home)))
            case CleanupWorktree():
                return self._cleanup(message)
            case RemoteWorkers():
                return RemoteWorkerList(workers=remote_workers())
            case CleanupBranches():
                return self._cleanup_branches(message)
            case PruneWorktrees():
                try:
                    self._prune()
                finally:
                    self.tell_later(PRUNE_EVERY_S, PruneWorktrees())
                return None
        return super().handle(message)

    def _wake(self) -> None:
        if self._pool is None:
            return
        now = self.context.clock.monotonic()
        for index in range(self._count):
            self.context.tell(self._pool.name_of(str(index)), Poll(sent_at=now))

    def _task_state(self, task_id: int) -> str:
        found = self.context.ask("tasks", Get(task_id=task_id))
        return found.task.state.value if isinstance(found, Found) else ""

    def _entry(self, item: worktrees.WorktreeInfo) -> WorktreeEntry:
        return WorktreeEntry(task_id=item.task_id, path=str(item.path), repo=str(item.repo or ""),
                             branch=item.branch, dirty=item.dirty, task_state=self._task_state(item.task_id),
                             modified_at=item.modified_at)

    def _cleanup(self, message: CleanupWorktree) -> CleanedUp | NotFound | Refused:
        item = worktrees.info(self.context.home, message.task_id)
        if item is None:
            return NotFound(kind="worktree of task", id=str(message.task_id))
        refusal = worktrees.cleanup_refusal(item, task_state=self._task_state(item.task_id) or None,
                                            force=message.force)
        if refusal is not None:
            return Refused(reason=refusal, code=RefusalCode.WRONG_STATE)
        worktrees.cleanup(self.context.home, item)
        entry = task_branches.recorded(self.context.home, item.task_id)
        removed = ""
        if entry is not None and self._orphaned(entry):
            try:
                removed = entry.branch if task_branches.release(self.context.home, entry.task_id) else ""
            except WorktreeError as error:
                log.warning("task %d: its branch stays: %s", item.task_id, error)
        return CleanedUp(task_id=message.task_id, path=str(item.path), branch=removed)

    def _orphaned(self, entry: task_branches.TaskBranch) -> bool:
        listed = self.context.ask("reviews", ListReviews(task_id=entry.task_id, limit=1))
        review_state = listed.reviews[0].state.value if listed.reviews else ""
        return task_branches.orphaned(task_state=self._task_state(entry.task_id), review_state=review_state,
                                      has_worktree=worktrees.path_of(self.context.home, entry.task_id).exists())

    def _cleanup_branches(self, message: CleanupBranches) -> BranchesCleanedUp | Refused:
        if not is_human(message.origin):
            return Refused(reason=f"deleting branches needs a human, not {message.origin or 'an unnamed origin'}",
                           code=RefusalCode.NOT_HUMAN)
        removed, failed = [], []
        for entry in list(task_branches.ledger(self.context.home)):
            if not self._orphaned(entry):
                continue
            try:
                if task_branches.release(self.context.home, entry.task_id) is not None:
                    removed.append(f"{entry.repo} {entry.branch}")
            except WorktreeError as error:
                failed.append(str(error))
        return BranchesCleanedUp(removed=tuple(removed), failed=tuple(failed))

    def _prune(self) -> None:
        """Kept worktrees of ended tasks (failed, cancelled) past the keep
        period go; a worktree with uncommitted changes goes too: the period
        was the owner's time to look at it."""
        for item in worktrees.list_worktrees(self.context.home):
            if not worktrees.expired(item, keep_days=self._settings.keep_failed_worktrees_days):
                continue
            state = self._task_state(item.task_id)
            if state in (TaskState.FAILED.value, TaskState.CANCELLED.value, TaskState.SUCCEEDED.value, ""):
                log.info("pruning the kept worktree of task %d (%s): %s", item.task_id, state or "unknown",
                         Path(item.path))
                worktrees.cleanup(self.context.home, item)
