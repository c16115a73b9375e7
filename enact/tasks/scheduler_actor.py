"""The Scheduler: the clock for cron schedules and backlog promotion.

Owns ``scheduler.schedules`` and ``scheduler.backlog`` (key: the record's
id, 8 bytes big-endian) and ``scheduler.counters`` (the next id of each, so
an id is never reused after a removal: a schedule's id is part of its tasks'
idempotency keys). The rules are ``enact.tasks.scheduling``; this actor
keeps the clock (its own timer, ``scheduler.tick_s``), asks the task queue
and stores what it did. Every tick first checks the epoch fence: a fenced
daemon submits nothing (and the queue refuses a fenced write anyway).

The backlog lives here rather than in an actor of its own: its only effect
besides its own records is the promotion, which is a tick's business when
``tasks.auto_promote`` is on.
"""

from __future__ import annotations

import logging
import struct
from typing import Any, TypeVar

import lmdb

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.actors._ticking import TickingActor
from enact.budget.gate import BudgetGate
from enact.claimed_clock import Decision, nest_flat_claim
from enact.messages.common import NotFound, RefusalCode, Refused
from enact.messages.scheduler import (
    AddItem,
    AddSchedule,
    Backlog,
    Drop,
    Dropped,
    ItemAdded,
    ListItems,
    ListSchedules,
    Promote,
    Promoted,
    RemoveSchedule,
    ScheduleAdded,
    ScheduleEntry,
    ScheduleList,
    ScheduleRemoved,
    Tick,
)
from enact.messages.tasks import Found, Get, GetByKey, Leases, Submit
from enact.schedules import ScheduleError
from enact.spoken import Audience
from enact.storage import RecordTable
from enact.tasks import scheduling
from enact.tasks.metrics import TasksMetrics
from enact.tasks.queue import NO_REPOSITORY
from enact.tasks.repositories import usable
from enact.tasks.scheduling import BacklogItem, Schedule
from enact.tasks.settings import TasksSettings

log = logging.getLogger(__name__)

SCHEDULES = "scheduler.schedules"
BACKLOG = "scheduler.backlog"
COUNTERS = "scheduler.counters"
DATABASES = (SCHEDULES, BACKLOG, COUNTERS)
ORIGIN = "scheduler"
MAX_ITEMS = 10_000

_ID = struct.Struct(">Q")
R = TypeVar("R")


def _key(record_id: int) -> bytes:
    return _ID.pack(record_id)


def _item_not_found(item_id: int) -> NotFound:
    return NotFound(kind="backlog item", id=str(item_id))


class SchedulerActor(TickingActor):
    fenced_note = "it submits nothing"

    def __init__(self, context: ActorContext, *, budget: BudgetGate | None = None) -> None:
        settings = context.config.typed(TasksSettings)
        self._budget = budget
        super().__init__(context, every_s=settings.scheduler_tick_s, tick=Tick())
        self._store = context.own_store()
        self._schedules = RecordTable(self._store.table(SCHEDULES), Schedule, upgrade=nest_flat_claim)
        self._backlog = RecordTable(self._store.table(BACKLOG), BacklogItem)
        self._ids = self._store.table(COUNTERS)
        self._auto_promote = settings.auto_promote
        self._default_repo = settings.default_repo

    def handle(self, message: Any) -> Any:
        match message:
            case Tick():
                return self.ticked()
            case AddSchedule():
                return self._add_schedule(message)
            case ListSchedules():
                return self._list_schedules()
            case RemoveSchedule():
                return self._remove_schedule(message.schedule_id)
            case AddItem():
                return self._add_item(message)
            case ListItems():
                return Backlog(items=tuple(self._items()))
            case Promote():
                return self._promote(message.item_id, origin=message.origin, repo=message.repo)
            case Drop():
                return self._drop(message.item_id)
        return super().handle(message)

    # -- records ----------------------------------------------------------

    def _next_id(self, txn: lmdb.Transaction, kind: str) -> int:
        key = kind.encode()
        counter = self._ids.get(txn, key)
        next_id = int(counter["next"]) if counter else 1
        self._ids.put(txn, key, {"next": next_id + 1})
        return next_id

    def _all(self, table: RecordTable[R]) -> list[R]:
        return self._store.read(lambda txn: [record for _, record in table.items(txn)])

    def _items(self) -> list[BacklogItem]:
        return sorted(self._all(self._backlog), key=lambda item: (item.priority.value, item.created_at, item.id))

    # -- cron -------------------------------------------------------------

    def _add_schedule(self, message: AddSchedule) -> ScheduleAdded | Refused:
        try:
            spec = scheduling.check_spec(message.spec)
        except ScheduleError as error:
            return Refused(reason=str(error), code=RefusalCode.INVALID)
        if not message.request.strip():
            return Refused(reason="a schedule needs a request (what its tasks should do)", code=RefusalCode.INVALID)
        # Checked now, and again as each due time submits (the queue checks).
        # Without one named, tasks.default_repo is the one then in force.
        named = message.repo or self._default_repo
        repo = usable(named) if named else Refused(reason=NO_REPOSITORY.to(Audience.CLI), code=RefusalCode.INVALID)
        if isinstance(repo, Refused):
            return repo
        now = self.context.clock.time()

        def write(txn: lmdb.Transaction) -> Schedule:
            schedule = Schedule(id=self._next_id(txn, "schedule"), spec=spec, request=message.request,
                                repo=repo if message.repo else "", created_at=now)
            self._schedules.put(txn, _key(schedule.id), schedule)
            return schedule

        schedule = self._store.write(write)
        return ScheduleAdded(schedule=schedule, next_due=scheduling.next_due(spec, now))

    def _list_schedules(self) -> ScheduleList:
        now = self.context.clock.time()
        return ScheduleList(schedules=tuple(
            ScheduleEntry(schedule=schedule, next_due=scheduling.upcoming(schedule, now))
            for schedule in self._all(self._schedules)))

    def _remove_schedule(self, schedule_id: int) -> ScheduleRemoved | NotFound:
        def write(txn: lmdb.Transaction) -> Schedule | None:
            schedule = self._schedules.get(txn, _key(schedule_id)) if schedule_id > 0 else None
            if schedule is not None:
                self._schedules.delete(txn, _key(schedule_id))
            return schedule

        removed = self._store.write(write)
        return ScheduleRemoved(schedule=removed) if removed else NotFound(kind="schedule", id=str(schedule_id))

    # -- the clock --------------------------------------------------------

    def tick(self) -> None:
        try:
            for schedule in self._all(self._schedules):
                self._run_schedule(schedule)
            if self._auto_promote:
                self._promote_when_idle()
        except ActorUnavailable as error:
            # An actor is restarting or slow: what is due is due next tick too.
            log.warning("scheduler: %s; trying again next tick", error)

    def _unfinished(self, task_id: int | None) -> bool:
        if task_id is None:
            return False
        reply = self.context.ask("tasks", Get(task_id=task_id))
        return isinstance(reply, Found) and not reply.task.state.ended

    def _run_schedule(self, schedule: Schedule) -> None:
        now = self.context.clock.time()
        step = scheduling.decide(schedule, now)
        if step.due is None or step.decision is Decision.WAIT:
            return
        due = step.due
        if step.decision is Decision.GIVE_UP:
            if self._queued_after_all(schedule, due):
                return
            self.context.metrics.of(TasksMetrics).cron_runs.labels(outcome="failed").inc()
            log.warning("schedule %d (%s): due time %d %s", schedule.id, schedule.spec, int(due), step.reason)
            self._save(scheduling.given_up(schedule, due, step.reason))
            return
        if step.decision is Decision.CLAIM and self._unfinished(schedule.last_task):
            self.context.metrics.of(TasksMetrics).cron_runs.labels(outcome="skipped-busy").inc()
            log.info("schedule %d (%s): task %s is unfinished; this run is skipped", schedule.id, schedule.spec,
                     schedule.last_task)
            self._save(scheduling.skipped_busy(schedule, due))
            return
        overrun = self._budget.overrun("task") if self._budget is not None else None
        if step.decision is Decision.CLAIM and overrun is not None:
            self.context.metrics.of(TasksMetrics).cron_runs.labels(outcome="skipped-budget").inc()
            log.info("schedule %d (%s): this run is skipped: %s", schedule.id, schedule.spec, overrun.said())
            self._save(scheduling.skipped_for_budget(schedule, due, overrun.said()))
            return
        if step.decision is Decision.RERUN:
            log.info("schedule %d (%s): submitting its claimed due time %d again (not acknowledged)",
                     schedule.id, schedule.spec, int(due))
        claimed = scheduling.claim(schedule, due)
        if not self._save(claimed):
            return  # removed meanwhile
        try:
            reply = self.context.ask("tasks", Submit(
                request=schedule.request, repo=schedule.repo, origin=ORIGIN,
                idempotency_key=scheduling.idempotency_key(schedule.id, due)))
        except ActorUnavailable as error:
            log.warning("schedule %d (%s): its task was not submitted (%s); trying again later", schedule.id,
                        schedule.spec, error)
            self._save(scheduling.submission_failed(claimed, now, str(error)))
            return
        self.context.metrics.of(TasksMetrics).cron_runs.labels(outcome="refused" if isinstance(reply, Refused)
                                              else "submitted").inc()
        if isinstance(reply, Refused):
            # Said once per reason: a repository that went away stays away
            # for many due times, and `cron list` shows the reason meanwhile.
            say = log.warning if reply.reason != schedule.refused else log.debug
            say("schedule %d (%s): the queue refused its task: %s (its due times queue nothing until this is "
                "fixed)", schedule.id, schedule.spec, reply.reason)
            self._save(scheduling.refused(claimed, due, reply.reason))
            return
        if schedule.refused:
            log.info("schedule %d (%s): the queue takes its tasks again", schedule.id, schedule.spec)
        self._save(scheduling.submitted(claimed, due, reply.task.id))

    def _queued_after_all(self, schedule: Schedule, due: float) -> bool:
        """Whether the claim's task was queued although no Submit was answered
        (each timed out after the queue took it); then it is recorded as
        submitted, so the next due time waits for that task. A queue that
        does not answer this either cannot say: the claim is given up all
        the same, or a wedged queue would hold the schedule forever."""
        key = scheduling.idempotency_key(schedule.id, due)
        try:
            found = self.context.ask("tasks", GetByKey(idempotency_key=key))
        except ActorUnavailable as error:
            log.warning("schedule %d (%s): could not ask whether %s was queued (%s)", schedule.id, schedule.spec,
                        key, error)
            return False
        if not isinstance(found, Found):
            return False
        self.context.metrics.of(TasksMetrics).cron_runs.labels(outcome="submitted").inc()
        log.info("schedule %d (%s): due time %d was queued as task %d although its submission went unanswered",
                 schedule.id, schedule.spec, int(due), found.task.id)
        self._save(scheduling.submitted(schedule, due, found.task.id))
        return True

    def _save(self, schedule: Schedule) -> bool:
        """Store ``schedule``, unless it was removed meanwhile (by a request
        between two of this tick's asks): it stays removed. Whether it was stored."""

        def write(txn: lmdb.Transaction) -> bool:
            if self._schedules.get(txn, _key(schedule.id)) is None:
                return False
            self._schedules.put(txn, _key(schedule.id), schedule)
            return True

        stored: bool = self._store.write(write)
        return stored

    # -- the backlog ------------------------------------------------------

    def _add_item(self, message: AddItem) -> ItemAdded | Refused:
        if not message.text.strip():
            return Refused(reason="a backlog item needs text (what should be done)", code=RefusalCode.INVALID)
        # An item may name none: its promotion may (else tasks.default_repo).
        repo = usable(message.repo) if message.repo else ""
        if isinstance(repo, Refused):
            return repo
        now = self.context.clock.time()

        def write(txn: lmdb.Transaction) -> ItemAdded | Refused:
            if self._backlog.table.count(txn) >= MAX_ITEMS:
                return Refused(reason=f"the backlog holds {MAX_ITEMS} items; promote or drop some first",
                                code=RefusalCode.LIMIT)
            item = BacklogItem(id=self._next_id(txn, "item"), text=message.text, priority=message.priority,
                               repo=repo, created_at=now)
            self._backlog.put(txn, _key(item.id), item)
            return ItemAdded(item=item)

        return self._store.write(write)

    def _promote(self, item_id: int, *, origin: str, repo: str = "") -> Promoted | NotFound | Refused:
        item = self._store.read(lambda txn: self._backlog.get(txn, _key(item_id))) if item_id > 0 else None
        if item is None:
            return _item_not_found(item_id)
        # The key makes a promotion repeated after a crash (submitted, not
        # yet dropped) find its task instead of queuing a second one.
        reply = self.context.ask("tasks", Submit(request=item.text, repo=repo or item.repo, origin=origin or ORIGIN,
                                                 idempotency_key=f"backlog:{item.id}"))
        if isinstance(reply, Refused):
            return Refused(reason=f"backlog item {item.id} stays: {reply.reason}", code=reply.code)
        self._store.write(lambda txn: self._backlog.delete(txn, _key(item.id)))
        return Promoted(item=item, submitted=reply)

    def _drop(self, item_id: int) -> Dropped | NotFound:
        def write(txn: lmdb.Transaction) -> BacklogItem | None:
            item = self._backlog.get(txn, _key(item_id)) if item_id > 0 else None
            if item is not None:
                self._backlog.delete(txn, _key(item_id))
            return item

        dropped = self._store.write(write)
        return Dropped(item=dropped) if dropped else _item_not_found(item_id)

    def _promote_when_idle(self) -> None:
        items = self._items()
        if not items:
            return
        overrun = self._budget.overrun("task") if self._budget is not None else None
        if overrun is not None:
            log.debug("backlog item %d waits: %s", items[0].id, overrun.said())  # said each tick: debug
            return
        table = self.context.ask("tasks", Leases())
        if table.leases or table.queued:
            return
        promoted = self._promote(items[0].id, origin=ORIGIN)
        if isinstance(promoted, Promoted):
            log.info("backlog item %d promoted to task %d (nothing was queued or running)", promoted.item.id,
                     promoted.submitted.task.id)

