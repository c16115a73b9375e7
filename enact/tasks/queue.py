"""The task queue's rules over its LMDB databases, without threads.

``TaskQueue`` is what the ``tasks`` actor runs: each method is one durable
(fenced) write transaction or one read, takes the time as an argument (so
tests drive the clock) and returns the reply the protocol declares. The
changes it committed are collected for the actor to publish; the owner
notices of the tasks that ended are held by the same commits
(``enact.tasks.notices``, ``TaskQueue.notices``).

Its databases and their keys are in ``enact.tasks.tables``; what a task
becomes when its attempt ends, in ``enact.tasks.lease_rules``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from typing import Any

import lmdb

from enact.messages.common import HUMAN_CLI, Done, NotFound, RefusalCode, Refused
from enact.messages.tasks import (
    MAX_PAGE,
    CancelAccepted,
    ChangedTasks,
    Claimed,
    EventAt,
    EventPage,
    Finish,
    Found,
    Lease,
    LeaseLost,
    LeaseRenewed,
    LeaseTable,
    NothingQueued,
    ReportPhase,
    Submit,
    Submitted,
    TaskChanged,
    TaskPage,
    TaskSnapshot,
)
from enact.spoken import Audience, Said
from enact.storage import Store
from enact.tasks.lease_rules import after_finish, after_lease_expired, lease_lapsed
from enact.tasks.notices import OwnerNotices
from enact.tasks.records import (
    WORKER_EVENTS,
    EventKind,
    FailureClass,
    Phase,
    Task,
    TaskEvent,
    TaskState,
    check_limits,
    clip,
)
from enact.tasks.tables import TaskTables

NO_REPOSITORY = Said(chat="no repository named: set tasks.default_repo in config.toml",
                     cli="no repository named: pass --repo PATH or set tasks.default_repo")
"""A task with no repository of its own and no default, as its asker is told it."""


class TaskQueue:
    def __init__(self, store: Store, *, default_repo: str, lease_ttl_s: float) -> None:
        self._store = store
        self._tables = TaskTables(store)
        self.default_repo = default_repo
        self.lease_ttl_s = lease_ttl_s
        self._changes: list[TaskChanged] = []
        self.notices = OwnerNotices(store, self._tables, lease_ttl_s=lease_ttl_s)

    def take_changes(self) -> list[TaskChanged]:
        """The changes committed since the last call, for publishing."""
        changes, self._changes = self._changes, []
        return changes

    # -- writing ------------------------------------------------------------

    def _write(self, fn: Any) -> Any:
        pending: list[TaskChanged] = []

        def run(txn: lmdb.Transaction) -> Any:
            pending.clear()  # a transaction retried after the map grew starts over
            self.notices.begin()
            return fn(txn, pending)

        result = self._store.write(run)
        self._changes.extend(pending)
        self.notices.committed()
        return result

    def _record(self, txn: lmdb.Transaction, pending: list[TaskChanged], before: Task | None, task: Task,
                kind: EventKind, summary: str, now: float, worker: str = "") -> Task:
        self._tables.save(txn, before, task)
        self.notices.hold(txn, task, now)
        event = TaskEvent(task_id=task.id, kind=kind, time=now, worker=worker or task.worker,
                          attempt=task.attempt, summary=clip(summary), state=task.state)
        sequence = self._tables.append_event(txn, event)
        pending.append(TaskChanged(task=task, event=EventAt(cursor=sequence, event=event)))
        return task

    # -- owners -------------------------------------------------------------

    def submit(self, message: Submit, now: float) -> Submitted | Refused:
        refused = self._unusable(message)
        if refused is None and (message.allow_paths or message.allow_fewer_tests) and message.origin != HUMAN_CLI:
            # Unlocking what checks a change is the owner's own act: neither
            # a model's action nor a chat message (whose words a model may
            # have written) can do it. A retry keeps its parent's unlocks
            # (``retry`` builds its Submit itself).
            refused = Refused(reason=f"only the owner's CLI unlocks protected paths or fewer tests, not "
                                     f"{message.origin}", code=RefusalCode.NOT_HUMAN)
        if refused is not None:
            return refused
        key = message.idempotency_key or f"fresh:{uuid.uuid4().hex}"

        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Submitted:
            return self._submit_in(txn, pending, message, key, now)

        result: Submitted = self._write(write)
        return result

    def _unusable(self, message: Submit) -> Refused | None:
        """Why ``message`` cannot be queued, None when it can."""
        why = check_limits(request=message.request, brief=message.brief, repairs=message.repairs,
                           deadline_s=message.deadline_s, allow_paths=message.allow_paths)
        if why is None and not (message.repo or self.default_repo):
            why = NO_REPOSITORY.to(Audience.of(message.origin, in_conversation=message.conversation is not None))
        return None if why is None else Refused(reason=why, code=RefusalCode.INVALID)

    def _submit_in(self, txn: lmdb.Transaction, pending: list[TaskChanged], message: Submit, key: str,
                   now: float) -> Submitted:
        existing = self._tables.by_key(txn, key)
        if existing is not None:
            return Submitted(task=existing, existing=True)
        task = Task(id=self._tables.next_id(txn), request=message.request, brief=message.brief,
                    repo=message.repo or self.default_repo, origin=message.origin, idempotency_key=key,
                    repairs=message.repairs, deadline_s=message.deadline_s, attempt=1, parent=message.parent,
                    state=TaskState.QUEUED, phase=Phase.NONE, repair=0, confined=None, review_id="", worktree="",
                    conversation=message.conversation, worker="", lease_expires_at=None,
                    allow_paths=message.allow_paths, allow_fewer_tests=message.allow_fewer_tests,
                    cancel_requested=False, not_before=0.0, failure_class=None, summary="",
                    created_at=now, updated_at=now, started_at=None, finished_at=None)
        self._tables.claim_key(txn, key, task.id)
        provenance = f"retry of task {task.parent}" if task.parent else f"from {task.origin}"
        self._record(txn, pending, None, task, EventKind.QUEUED, provenance, now)
        return Submitted(task=task, existing=False)

    def cancel(self, task_id: int, now: float) -> CancelAccepted | NotFound | Refused:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> CancelAccepted | NotFound | Refused:
            task = self._tables.get(txn, task_id)
            if task is None:
                return _not_found(task_id)
            if task.state.ended:
                return Refused(reason=f"task {task_id} has already ended ({task.state})",
                               code=RefusalCode.WRONG_STATE)
            if task.state is TaskState.RUNNING:
                if task.cancel_requested:
                    return CancelAccepted(task=task, at_once=False)
                marked = dataclasses.replace(task, cancel_requested=True, updated_at=now)
                self._record(txn, pending, task, marked, EventKind.CANCEL_REQUESTED,
                             "cancel requested; the worker stops at its next heartbeat", now)
                return CancelAccepted(task=marked, at_once=False)
            ended = dataclasses.replace(task, state=TaskState.CANCELLED, phase=Phase.NONE, repair=0,
                                        summary="cancelled before it ran", updated_at=now, finished_at=now)
            self._record(txn, pending, task, ended, EventKind.CANCELLED, ended.summary, now)
            return CancelAccepted(task=ended, at_once=True)

        result: CancelAccepted | NotFound | Refused = self._write(write)
        return result

    def retry(self, task_id: int, origin: str, now: float) -> Submitted | NotFound | Refused:
        """A child of a failed or cancelled task, once: the child's key comes
        from the parent's stored state, read in the same transaction, so a
        retry sent twice (or replayed after a crash) finds the child made by
        the first instead of queuing a second."""

        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Submitted | NotFound | Refused:
            task = self._tables.get(txn, task_id)
            if task is None:
                return _not_found(task_id)
            if task.state not in (TaskState.FAILED, TaskState.CANCELLED):
                return Refused(reason=f"task {task_id} {task.state.as_told}; "
                                      "only a failed or cancelled task is retried",
                               code=RefusalCode.WRONG_STATE)
            child = Submit(request=task.request, brief=task.brief, repo=task.repo, origin=origin,
                           repairs=task.repairs, deadline_s=task.deadline_s, parent=task_id,
                           conversation=task.conversation, allow_paths=task.allow_paths,
                           allow_fewer_tests=task.allow_fewer_tests)
            refused = self._unusable(child)
            if refused is not None:
                return refused
            # An ended task's attempt no longer changes: one key per ended task.
            return self._submit_in(txn, pending, child, f"retry:{task_id}:{task.attempt}", now)

        result: Submitted | NotFound | Refused = self._write(write)
        return result

    def resume(self, task_id: int, now: float) -> Task | NotFound | Refused:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Task | NotFound | Refused:
            task = self._tables.get(txn, task_id)
            if task is None:
                return _not_found(task_id)
            if task.state is not TaskState.PAUSED:
                return Refused(reason=f"task {task_id} {task.state.as_told}; only a paused task is resumed",
                               code=RefusalCode.WRONG_STATE)
            # The owner's resume is not a failure of the task: it uses up no attempt.
            queued = dataclasses.replace(task, state=TaskState.QUEUED, attempt=task.attempt + 1, not_before=0.0,
                                         uncounted_attempts=task.uncounted_attempts + 1, failure_class=None,
                                         updated_at=now, finished_at=None)
            return self._record(txn, pending, task, queued, EventKind.RESUMED, "resumed by its owner", now)

        result: Task | NotFound | Refused = self._write(write)
        return result

    def resume_after_budget(self, now: float) -> list[int]:
        """Queue again each task paused because its budget was spent (its
        failure class ``budget``); the ids resumed."""
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> list[int]:
            resumed = []
            for task_id in list(self._tables.ids_in_state(txn, TaskState.PAUSED)):
                task = self._tables.get(txn, task_id)
                if task is None or task.failure_class is not FailureClass.BUDGET:
                    continue
                queued = dataclasses.replace(task, state=TaskState.QUEUED, attempt=task.attempt + 1, not_before=0.0,
                                             uncounted_attempts=task.uncounted_attempts + 1, failure_class=None,
                                             updated_at=now, finished_at=None)
                self._record(txn, pending, task, queued, EventKind.RESUMED, "resumed: the task budget's day "
                             "started again", now)
                resumed.append(task_id)
            return resumed

        result: list[int] = self._write(write)
        return result

    # -- workers ------------------------------------------------------------

    def claim(self, worker_id: str, now: float) -> Claimed | NothingQueued:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Claimed | NothingQueued:
            next_due: float | None = None
            # Read one at a time: the oldest due task is usually the first.
            for task_id in self._tables.ids_in_state(txn, TaskState.QUEUED):
                task = self._tables.get(txn, task_id)
                if task is None:
                    continue
                if task.not_before > now:
                    wait = task.not_before - now
                    next_due = wait if next_due is None else min(next_due, wait)
                    continue
                expires = now + self.lease_ttl_s
                claimed = dataclasses.replace(task, state=TaskState.RUNNING, worker=worker_id,
                                              lease_expires_at=expires, phase=Phase.NONE, repair=0,
                                              cancel_requested=False, started_at=now, updated_at=now)
                self._record(txn, pending, task, claimed, EventKind.CLAIMED,
                             f"lease of {self.lease_ttl_s:g} s", now)
                return Claimed(task=claimed, lease_expires_at=expires, lease_ttl_s=self.lease_ttl_s)
            return NothingQueued(next_due_in_s=next_due)

        result: Claimed | NothingQueued = self._write(write)
        return result

    def _held(self, txn: lmdb.Transaction, task_id: int, worker_id: str, attempt: int,
              now: float) -> Task | LeaseLost:
        """The task, while ``worker_id`` holds its lease for ``attempt``: a
        lease past its expiry is lost although the sweep has not yet put the
        task back (nothing changes; the sweep does that)."""
        task = self._tables.get(txn, task_id)
        if task is None:
            return LeaseLost(task_id=task_id, reason=f"no task {task_id}")
        if task.state is not TaskState.RUNNING or task.worker != worker_id or task.attempt != attempt:
            holder = f"held by {task.worker} for attempt {task.attempt}" if task.worker else str(task.state)
            return LeaseLost(task_id=task_id, reason=f"task {task_id} is no longer this worker's ({holder})")
        if lease_lapsed(task, now):
            return LeaseLost(task_id=task_id, reason=f"the lease of {worker_id} on task {task_id} expired "
                                                     f"(attempt {attempt})")
        return task

    def heartbeat(self, task_id: int, worker_id: str, attempt: int, now: float) -> LeaseRenewed | LeaseLost:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> LeaseRenewed | LeaseLost:
            task = self._held(txn, task_id, worker_id, attempt, now)
            if isinstance(task, LeaseLost):
                return task
            expires = now + self.lease_ttl_s
            self._tables.save(txn, task, dataclasses.replace(task, lease_expires_at=expires, updated_at=now))
            return LeaseRenewed(lease_expires_at=expires, cancel_requested=task.cancel_requested)

        result: LeaseRenewed | LeaseLost = self._write(write)
        return result

    def report_phase(self, message: ReportPhase, now: float) -> Done | LeaseLost:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Done | LeaseLost:
            task = self._held(txn, message.task_id, message.worker_id, message.attempt, now)
            if isinstance(task, LeaseLost):
                return task
            kind = message.event if message.event in WORKER_EVENTS else EventKind.PHASE
            changed = dataclasses.replace(
                task, phase=message.phase, repair=message.repair if message.phase is Phase.REPAIR else 0,
                confined=task.confined if message.confined is None else message.confined,
                worktree=message.worktree or task.worktree, review_id=message.review_id or task.review_id,
                lease_expires_at=now + self.lease_ttl_s, updated_at=now)
            summary = message.summary or changed.progress
            self._record(txn, pending, task, changed, kind, summary, now)
            return Done()

        result: Done | LeaseLost = self._write(write)
        return result

    def finish(self, message: Finish, now: float) -> Done | LeaseLost:
        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> Done | LeaseLost:
            task = self._held(txn, message.task_id, message.worker_id, message.attempt, now)
            if isinstance(task, LeaseLost):
                return task
            changed, kind, summary = after_finish(task, message, now)
            self._record(txn, pending, task, changed, kind, summary, now, message.worker_id)
            if changed.state is TaskState.SUCCEEDED and message.experience is not None:
                # What the queue knows itself is its own, not the worker's word.
                self._tables.keep_experience(txn, dataclasses.replace(
                    message.experience, task_id=task.id, request=task.request, attempt=changed.attempt,
                    review_id=changed.review_id, finished_at=now).bounded())
            return Done()

        result: Done | LeaseLost = self._write(write)
        return result

    def expire_leases(self, now: float) -> int:
        """Running tasks whose lease ran out go back to the queue (attempt + 1),
        or fail ``worker-lost`` after their last attempt. Returns how many."""

        def write(txn: lmdb.Transaction, pending: list[TaskChanged]) -> int:
            lapsed = [t for t in self._tables.in_state(txn, TaskState.RUNNING) if lease_lapsed(t, now)]
            for task in lapsed:
                changed, kind, summary = after_lease_expired(task, now)
                self._record(txn, pending, task, changed, kind, summary, now, task.worker)
            return len(lapsed)

        if not self._store.read(lambda txn: any(True for _ in self._tables.ids_in_state(txn, TaskState.RUNNING))):
            return 0  # nothing running: no write transaction for an idle timer
        result: int = self._write(write)
        return result

    # -- reading ------------------------------------------------------------

    def get(self, task_id: int) -> Found | NotFound:
        task = self._store.read(lambda txn: self._tables.get(txn, task_id))
        return _not_found(task_id) if task is None else Found(task=task)

    def by_key(self, idempotency_key: str) -> Found | NotFound:
        task = self._store.read(lambda txn: self._tables.by_key(txn, idempotency_key))
        return NotFound(kind="task with key", id=idempotency_key) if task is None else Found(task=task)

    def list(self, state: TaskState | None, limit: int, before: int | None) -> TaskPage:
        tasks, more = self._store.read(lambda txn: self._tables.page(txn, state, _bounded(limit), before))
        return TaskPage(tasks=tuple(tasks), next_before=tasks[-1].id if more and tasks else None)

    def events(self, task_id: int | None, cursor: int, limit: int) -> EventPage | NotFound:
        def read(txn: lmdb.Transaction) -> EventPage | NotFound:
            if task_id is not None and self._tables.get(txn, task_id) is None:
                return _not_found(task_id)
            found, more = self._tables.events(txn, task_id, cursor, _bounded(limit))
            return EventPage(events=tuple(found), next_cursor=found[-1].cursor if found else cursor, more=more)

        result: EventPage | NotFound = self._store.read(read)
        return result

    def changed_since(self, after: int, limit: int) -> ChangedTasks:
        def read(txn: lmdb.Transaction) -> ChangedTasks:
            ids, cursor, more = self._tables.changed_since(txn, after, _bounded(limit))
            snapshots = []
            for task_id in ids:
                task = self._tables.get(txn, task_id)
                # The newest events: a long task's latest state is what a reader needs.
                events = self._tables.newest_events(txn, task_id, MAX_PAGE)
                if task is not None and events:
                    experience = self._tables.experience(txn, task_id) if task.state is TaskState.SUCCEEDED else None
                    snapshots.append(TaskSnapshot(task=task, events=tuple(events), experience=experience))
            snapshots.sort(key=lambda snapshot: snapshot.events[-1].cursor)
            return ChangedTasks(tasks=tuple(snapshots), next_cursor=cursor, more=more)

        result: ChangedTasks = self._store.read(read)
        return result

    def counts(self, states: Iterable[TaskState]) -> dict[TaskState, int]:
        """How many tasks are in each of ``states`` (walk their index: meant
        for the states tasks leave, whose sets stay small)."""
        return self._store.read(lambda txn: {state: sum(1 for _ in self._tables.ids_in_state(txn, state))
                                             for state in states})

    def leases(self) -> LeaseTable:
        def read(txn: lmdb.Transaction) -> LeaseTable:
            leases = tuple(
                Lease(task_id=t.id, worker_id=t.worker, attempt=t.attempt, expires_at=t.lease_expires_at or 0.0,
                      progress=t.progress, started_at=t.started_at or t.updated_at)
                for t in self._tables.in_state(txn, TaskState.RUNNING))
            queued = sum(1 for _ in self._tables.ids_in_state(txn, TaskState.QUEUED))
            return LeaseTable(leases=leases, queued=queued)

        result: LeaseTable = self._store.read(read)
        return result


def _bounded(limit: int) -> int:
    return max(1, min(limit, MAX_PAGE))


def _not_found(task_id: int) -> NotFound:
    return NotFound(kind="task", id=str(task_id))
