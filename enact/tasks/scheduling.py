"""Cron schedules and the backlog as plain records and rules, testable
without threads: the Scheduler actor (``enact.tasks.scheduler_actor``) stores
them, keeps the clock and asks the queue.

A schedule is written in the one schedule grammar (``enact.schedules``): an
interval counted from when it was added, a daily local time or a five-field
cron expression. Each due time submits one task with the idempotency key
``cron:<schedule id>:<due time>``, claimed before and acknowledged after by
the claimed clock's rules (``enact.claimed_clock``): a claim found
unacknowledged is submitted again under the same key, so the queue finds
the task already queued instead of a later due time queuing a second; a
submission that keeps failing is given up after the clock's attempts,
unless the queue has a task under its key after all (a Submit that timed
out may still have been queued): then it counts as submitted. What
is cron's own: due times that pass while the schedule's previous task is
unfinished are skipped (handled without a task).
"""

from __future__ import annotations

import enum
import time
from dataclasses import replace
from functools import partial

from enact import claimed_clock, schedules
from enact.claimed_clock import NO_CLAIM, ClaimState, Step
from enact.frozen_dataclass import dataclass

MAX_TEXT = 20_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    id: int
    spec: str
    request: str
    repo: str
    created_at: float
    last_due: float | None = None
    """The latest due time handled (submitted or skipped); None before the first."""
    last_task: int | None = None
    """The task the latest submission made; a schedule waits for it to end."""
    skipped: int = 0
    """Due times passed over because the previous task was unfinished."""
    claim: ClaimState = NO_CLAIM
    """A due time whose task was (or was about to be) submitted and not yet
    acknowledged: it is submitted again, whatever is due by then (stored
    flat before; ``claimed_clock.nest_flat_claim`` reads those records)."""
    failed: int = 0
    """Due times given up after their submissions kept failing."""
    last_failure: str = ""
    """Why the latest due time given up failed."""
    refused: str = ""
    """Why the queue refused the latest due time's task (its repository
    is no longer one a task can work on, say); "" once it takes one again."""
    skipped_for_budget: int = 0
    """Due times passed over because the day's task budget was spent."""
    budget_skip: str = ""
    """Why the latest of those was skipped."""


def check_spec(spec: str) -> str:
    """The spec, normalised; ScheduleError says what is wrong with it."""
    return schedules.parse(spec).spec


def next_due(spec: str, after: float) -> float:
    """The first due time strictly after ``after`` (for an interval, counted
    in whole intervals from ``after``, which is then the anchor)."""
    return schedules.next_due(schedules.parse(spec), after, anchor=after)


def latest_due(spec: str, since: float, now: float) -> float | None:
    """The latest due time in (since, now], None if none has come (an
    interval counts whole intervals from ``since``)."""
    return schedules.latest_due(schedules.parse(spec), now, since=since, anchor=since)


def _since(schedule: Schedule) -> float:
    return schedule.last_due if schedule.last_due is not None else schedule.created_at


def decide(schedule: Schedule, now: float) -> Step:
    """What this tick does with ``schedule`` (``enact.claimed_clock``); a
    claim comes before any later due time (its task may be queued already)."""
    return claimed_clock.decide(_since(schedule), schedule.claim, now, partial(latest_due, schedule.spec))


def upcoming(schedule: Schedule, now: float) -> float:
    """When the schedule next submits: at once or after the back-off for an
    open claim, else its next due time."""
    return claimed_clock.upcoming(_since(schedule), schedule.claim, now, partial(next_due, schedule.spec))


def moment_said(spec: str, moment: float) -> str:
    """A time of the schedule ``spec`` as cron's commands say it, in local
    time: to the second when its due times fall between minutes
    (``every 10s``), else to the minute."""
    seconds = ":%S" if schedules.finer_than_a_minute(spec) else ""
    return time.strftime(f"%Y-%m-%d %H:%M{seconds}", time.localtime(moment))


def next_run_said(schedule: Schedule, next_due: float) -> str:
    """When ``schedule`` next submits, as ``cron list`` says it: a pending
    claim (and its retry time after a failure) before any next due time."""
    claim = schedule.claim
    said = partial(moment_said, schedule.spec)
    if claim.claimed is None:
        return f"next {said(next_due)}"
    retry = f", retry {said(claim.retry_at)}" if claim.retry_at is not None else ""
    return f"claimed {said(claim.claimed)}, pending{retry}"


def repo_said(schedule: Schedule) -> str:
    """The repository a schedule's tasks work in; one named by none is the
    ``tasks.default_repo`` of when each task is submitted."""
    return schedule.repo or "tasks.default_repo"


def failures_said(schedule: Schedule) -> str:
    """The due times given up, with the latest reason, those skipped for
    budget, and why the queue refuses its tasks; empty when none."""
    said = [f"{schedule.failed} failed (latest: {schedule.last_failure})"] if schedule.failed else []
    if schedule.skipped_for_budget:
        said.append(f"{schedule.skipped_for_budget} skipped for budget (latest: {schedule.budget_skip})")
    if schedule.refused:
        said.append(f"refused: {schedule.refused}")
    return "  ".join(said)


def idempotency_key(schedule_id: int, due: float) -> str:
    return f"cron:{schedule_id}:{int(due)}"


def claim(schedule: Schedule, due: float) -> Schedule:
    """The schedule to commit before the task for ``due`` is submitted."""
    return replace(schedule, claim=claimed_clock.claim(schedule.claim, due))


def submission_failed(schedule: Schedule, now: float, reason: str) -> Schedule:
    """The schedule after the claim's submission failed (the queue did not
    answer): submitted again after the back-off."""
    return replace(schedule, claim=claimed_clock.failed(schedule.claim, now, reason))


def _acknowledged(schedule: Schedule, due: float) -> Schedule:
    return replace(schedule, claim=NO_CLAIM, last_due=due)


def submitted(schedule: Schedule, due: float, task_id: int) -> Schedule:
    """The schedule after the task for ``due`` was queued, its claim acknowledged."""
    return replace(_acknowledged(schedule, due), last_task=task_id, refused="")


def refused(schedule: Schedule, due: float, reason: str) -> Schedule:
    """The schedule after the queue refused the task for ``due``: the due
    time is spent all the same (or the schedule would ask again every tick)."""
    return replace(_acknowledged(schedule, due), refused=reason)


def skipped_busy(schedule: Schedule, due: float) -> Schedule:
    """The schedule after ``due`` came while its previous task was unfinished."""
    return replace(_acknowledged(schedule, due), skipped=schedule.skipped + 1)


def skipped_for_budget(schedule: Schedule, due: float, reason: str) -> Schedule:
    """The schedule after ``due`` came while the day's task budget was spent:
    no task, the due time spent (the next one runs if the budget allows)."""
    return replace(_acknowledged(schedule, due), skipped_for_budget=schedule.skipped_for_budget + 1,
                   budget_skip=reason)


def given_up(schedule: Schedule, due: float, reason: str) -> Schedule:
    """The schedule after its claim on ``due`` was given up for ``reason``."""
    return replace(_acknowledged(schedule, due), failed=schedule.failed + 1, last_failure=reason)


# -- the backlog ---------------------------------------------------------


class Priority(enum.StrEnum):
    P0 = "p0"
    P1 = "p1"
    P2 = "p2"


@dataclass(frozen=True, slots=True, kw_only=True)
class BacklogItem:
    """Work to do some day, not a task yet: ``promote`` submits it."""

    id: int
    text: str
    priority: Priority
    repo: str
    created_at: float


def next_to_promote(items: list[BacklogItem]) -> BacklogItem | None:
    """The highest-priority item, the oldest first among equals."""
    return min(items, key=lambda item: (item.priority.value, item.created_at, item.id), default=None)
