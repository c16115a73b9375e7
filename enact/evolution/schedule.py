"""The evolve schedule's clock: when a run is due, and the claim and
acknowledgement that make it happen once.

The Scheduler actor keeps one ``EvolveClock`` (in ``scheduler.evolve``) and
follows these rules on every tick: a fenced daemon runs nothing; otherwise
the latest due time since the last acknowledged one (missed due times
coalesce into it) is *claimed*, committed before anything is done; then the
run acts (scan, propose, brainstorm, report) and the due time is
*acknowledged*. A claim found unacknowledged (the daemon died, or an actor
it needed did not answer) is run again, at most ``MAX_ATTEMPTS`` times in
all; each step of a run is safe to repeat (scans keep checkpoints, a new
proposal supersedes the last, the report goes once per notice id).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from enact.evolution.modes import EvolveSchedule, latest_due, next_due

MAX_ATTEMPTS = 3
MAX_REPORT = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class EvolveClock:
    """The stored state of the evolve schedule."""

    spec: str
    """The schedule these times count for; another spec starts a new anchor."""
    anchor: float
    """When the spec was first seen: intervals count from here, and no due
    time before it is run."""
    acknowledged: float | None = None
    """The latest due time whose run finished (or was passed over)."""
    claimed: float | None = None
    """A due time claimed whose run has not been acknowledged."""
    attempts: int = 0
    """Runs started for the claimed due time."""
    last_run_at: float | None = None
    last_outcome: str = ""
    """What the last run did, in a line or a few (the owner's report)."""
    coalesced: int = 0
    """Due times that passed without a run of their own (a later one ran)."""


def start(schedule: EvolveSchedule, now: float) -> EvolveClock:
    return EvolveClock(spec=schedule.spec, anchor=now)


def follow(clock: EvolveClock | None, schedule: EvolveSchedule, now: float) -> EvolveClock:
    """The clock for ``schedule``: the stored one, or a new anchor when
    there is none or the configured schedule changed (its history is kept)."""
    if clock is None:
        return start(schedule, now)
    if clock.spec != schedule.spec:
        return replace(clock, spec=schedule.spec, anchor=now, acknowledged=None, claimed=None, attempts=0)
    return clock


class Decision(enum.Enum):
    NOTHING_DUE = "nothing-due"
    FENCED = "fenced"
    RUN = "run"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    decision: Decision
    due: float | None = None
    resumed: bool = False
    """The due time was claimed before and not acknowledged."""


def decide(clock: EvolveClock, schedule: EvolveSchedule, now: float, *, current: bool,
           tz: datetime.tzinfo | None = None) -> Step:
    """What this tick does. ``current``: the daemon still holds the epoch."""
    since = clock.acknowledged if clock.acknowledged is not None else clock.anchor
    due = latest_due(schedule, now, since=since, anchor=clock.anchor, tz=tz)
    resumed = clock.claimed is not None and (due is None or due <= clock.claimed)
    if resumed:
        due = clock.claimed
    if due is None:
        return Step(decision=Decision.NOTHING_DUE)
    if not current:
        return Step(decision=Decision.FENCED, due=due)
    return Step(decision=Decision.RUN, due=due, resumed=resumed)


def claim(clock: EvolveClock, due: float) -> EvolveClock:
    """The clock to commit before the run for ``due`` acts."""
    attempts = clock.attempts + 1 if clock.claimed == due else 1
    return replace(clock, claimed=due, attempts=attempts)


def exhausted(clock: EvolveClock) -> bool:
    """The claimed run was started ``MAX_ATTEMPTS`` times: give it up."""
    return clock.claimed is not None and clock.attempts > MAX_ATTEMPTS


def acknowledge(clock: EvolveClock, due: float, now: float, outcome: str,
                schedule: EvolveSchedule, tz: datetime.tzinfo | None = None) -> EvolveClock:
    """The clock after the run for ``due`` finished, with ``outcome`` said."""
    since = clock.acknowledged if clock.acknowledged is not None else clock.anchor
    skipped = _due_times_between(schedule, since, due, anchor=clock.anchor, tz=tz)
    return replace(clock, acknowledged=due, claimed=None, attempts=0, last_run_at=now,
                   last_outcome=outcome[:MAX_REPORT], coalesced=clock.coalesced + skipped)


def _due_times_between(schedule: EvolveSchedule, since: float, due: float, *, anchor: float,
                       tz: datetime.tzinfo | None) -> int:
    """Due times in (since, due), those that coalesced into ``due``."""
    if not schedule.daily:
        return max(0, round((due - max(since, anchor)) / schedule.interval_s) - 1)
    count, moment = 0, since
    while count < 400:  # a daily schedule missed for more than a year counts as that
        moment = next_due(schedule, moment, anchor=anchor, tz=tz)
        if moment >= due:
            break
        count += 1
    return count


def upcoming(clock: EvolveClock, schedule: EvolveSchedule, now: float,
             tz: datetime.tzinfo | None = None) -> float:
    """When the next run is due: a pending claim or a due time already
    passed means now; else the next due time."""
    if clock.claimed is not None:
        return now
    since = clock.acknowledged if clock.acknowledged is not None else clock.anchor
    if latest_due(schedule, now, since=since, anchor=clock.anchor, tz=tz) is not None:
        return now
    return next_due(schedule, now, anchor=clock.anchor, tz=tz)


def run_id(due: float) -> str:
    """The run's id, from its due time: the notice id and proposal log say it."""
    return f"evolve:{int(due)}"


def proposal_needed(*, found_signals: bool, active_created_at: Iterable[float],
                    open_proposal_at: float | None) -> bool:
    """Whether a run should ask for a proposal: a scan found new signals, or
    there are active candidates and either no proposal is open or one of them
    was created after it. Comparing times, not ids, holds beyond the 24
    candidates a proposal shows; curating the same ones again would spend
    tokens on an idle home for the same answer."""
    created = list(active_created_at)
    if found_signals:
        return True
    if not created:
        return False
    return open_proposal_at is None or max(created) > open_proposal_at
