"""Cron schedules and the backlog as plain records and rules, testable
without threads: the Scheduler actor (``enact.actors.scheduler``) stores
them, keeps the clock and asks the queue.

A schedule is an interval (``every 10m``, ``every 2h``, ``every 1d``; also
``s`` for seconds) counted from when it was added, or a five-field cron
expression (``0 9 * * 1-5``) in the daemon's local time, evaluated by
``croniter`` (imported when first needed: the CLI loads this module for
its records). Each due time submits one task with the idempotency key
``cron:<schedule id>:<due time>``. The due time is *claimed* (stored in the
schedule, committed) before its task is submitted and *acknowledged* after;
a claim found unacknowledged (the daemon died between the two, or the queue
did not answer) is submitted again with the same due time, so the same key
finds the task already queued instead of a later due time queuing a second.
Due times that pass while the schedule's
previous task is unfinished are skipped, and any number of due times missed
while the daemon was down coalesce into one run: the latest.
"""

from __future__ import annotations

import datetime
import enum
import re
from dataclasses import dataclass, replace

MAX_SPEC = 200
MAX_TEXT = 20_000
_INTERVAL = re.compile(r"every\s+(\d+)\s*([smhd])", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
MIN_INTERVAL_S = 1
MAX_INTERVAL_S = 366 * 86_400


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message is one line."""


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
    claimed: float | None = None
    """A due time whose task was (or was about to be) submitted and not yet
    acknowledged: the next tick submits it again, whatever is due by then."""


def interval_s(spec: str) -> int | None:
    """The interval of an ``every N<unit>`` spec, None for a cron expression."""
    match = _INTERVAL.fullmatch(spec.strip())
    if match is None:
        return None
    return int(match.group(1)) * _UNIT_S[match.group(2).lower()]


def check_spec(spec: str) -> str:
    """The spec, normalised; ScheduleError says what is wrong with it."""
    spec = " ".join(spec.split())
    if not spec or len(spec) > MAX_SPEC:
        raise ScheduleError(f"a schedule is 'every 10m', 'every 2h', 'every 1d' or a cron expression "
                            f"such as '0 9 * * 1-5' (at most {MAX_SPEC} characters)")
    seconds = interval_s(spec)
    if seconds is not None:
        if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
            raise ScheduleError(f"an interval is between {MIN_INTERVAL_S} s and 366 days, not {spec!r}")
        return spec.lower()
    if spec.lower().startswith("every"):
        raise ScheduleError(f"{spec!r}: an interval is 'every N' with a unit s, m, h or d (every 10m)")
    from croniter import croniter

    if len(spec.split()) != 5 or not croniter.is_valid(spec):
        raise ScheduleError(f"{spec!r} is neither an interval (every 10m) nor a five-field cron expression")
    return spec


def _local(moment: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(moment).astimezone()


def next_due(spec: str, after: float) -> float:
    """The first due time strictly after ``after`` (for an interval, counted
    in whole intervals from ``after``, which is then the anchor)."""
    seconds = interval_s(spec)
    if seconds is not None:
        return after + seconds
    from croniter import croniter

    return float(croniter(spec, _local(after)).get_next(float))


def latest_due(schedule: Schedule, now: float) -> float | None:
    """The latest due time in (anchor, now], where the anchor is the last
    handled due time (or the schedule's creation); None if none has come."""
    anchor = schedule.last_due if schedule.last_due is not None else schedule.created_at
    seconds = interval_s(schedule.spec)
    if seconds is not None:
        periods = int((now - anchor) // seconds)
        return anchor + periods * seconds if periods >= 1 else None
    first = next_due(schedule.spec, anchor)
    if first > now:
        return None
    # Straight to the latest: a long downtime on "* * * * *" must not step
    # through every minute it missed.
    from croniter import croniter

    latest = float(croniter(schedule.spec, _local(now + 1)).get_prev(float))
    return max(first, latest)


class Decision(enum.Enum):
    NOTHING_DUE = "nothing-due"
    SUBMIT = "submit"
    SKIP_BUSY = "skip-busy"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What one tick does with one schedule."""

    decision: Decision
    due: float | None = None
    resumed: bool = False
    """The due time was claimed before and not acknowledged."""


def decide(schedule: Schedule, now: float, *, previous_unfinished: bool) -> Step:
    """Whether ``schedule`` submits now: a claimed due time not yet
    acknowledged first (its task may be queued already; the previous task
    had ended when it was claimed); else the latest due time when one has
    come and its previous task has ended; a due time that comes while that
    task runs is skipped."""
    if schedule.claimed is not None:
        return Step(decision=Decision.SUBMIT, due=schedule.claimed, resumed=True)
    due = latest_due(schedule, now)
    if due is None:
        return Step(decision=Decision.NOTHING_DUE)
    if previous_unfinished:
        return Step(decision=Decision.SKIP_BUSY, due=due)
    return Step(decision=Decision.SUBMIT, due=due)


def idempotency_key(schedule_id: int, due: float) -> str:
    return f"cron:{schedule_id}:{int(due)}"


def claim(schedule: Schedule, due: float) -> Schedule:
    """The schedule to commit before the task for ``due`` is submitted."""
    return replace(schedule, claimed=due)


def handled(schedule: Schedule, step: Step, task_id: int | None) -> Schedule:
    """The schedule after ``step`` was carried out, its claim acknowledged
    (``task_id``: the task submitted; None when the queue refused it, and
    the due time is spent all the same, or the schedule would ask again
    every tick)."""
    if step.decision is Decision.SUBMIT:
        return replace(schedule, last_due=step.due, claimed=None,
                       last_task=schedule.last_task if task_id is None else task_id)
    if step.decision is Decision.SKIP_BUSY:
        return replace(schedule, last_due=step.due, skipped=schedule.skipped + 1)
    return schedule


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
