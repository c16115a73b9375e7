"""The evolve schedule's clock: when a run is due, and the claim and
acknowledgement that make it happen once.

The evolve actor keeps one ``EvolveClock`` (in ``scheduler.evolve``) and
follows the claimed clock's rules (``enact.claimed_clock``) on every tick of
a current daemon: the latest due time since the last acknowledged one
(missed due times coalesce into it) is *claimed*, committed before anything
is done; then the run acts (scan, propose, brainstorm, report) and the due
time is *acknowledged*. A claim found unacknowledged (the daemon died, or an
actor it needed did not answer) is run again after the clock's back-off,
and given up after its attempts. What is the evolve schedule's own: each
step of a run is safe to repeat (scans keep checkpoints, a new proposal
supersedes the last, the report goes once per notice id), so a later due
time supersedes an open claim; and the schedule counts from an anchor (an
interval, a daily time or a cron expression, ``enact.schedules``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import replace

from enact import claimed_clock
from enact.claimed_clock import NO_CLAIM, ClaimState, Step
from enact.frozen_dataclass import dataclass
from enact.schedules import ParsedSchedule, latest_due, next_due

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
    claim: ClaimState = NO_CLAIM
    """A due time claimed whose run has not been acknowledged (stored flat
    before; ``claimed_clock.nest_flat_claim`` reads those records)."""
    last_run_at: float | None = None
    last_outcome: str = ""
    """What the last run did, in a line or a few (the owner's report)."""
    coalesced: int = 0
    """Due times that passed without a run of their own (a later one ran)."""


def start(schedule: ParsedSchedule, now: float) -> EvolveClock:
    return EvolveClock(spec=schedule.spec, anchor=now)


def follow(clock: EvolveClock | None, schedule: ParsedSchedule, now: float) -> EvolveClock:
    """The clock for ``schedule``: the stored one, or a new anchor when
    there is none or the configured schedule changed (its history is kept)."""
    if clock is None:
        return start(schedule, now)
    if clock.spec != schedule.spec:
        return replace(clock, spec=schedule.spec, anchor=now, acknowledged=None, claim=NO_CLAIM)
    return clock


def _since(clock: EvolveClock) -> float:
    return clock.acknowledged if clock.acknowledged is not None else clock.anchor


def decide(clock: EvolveClock, schedule: ParsedSchedule, now: float,
           tz: datetime.tzinfo | None = None) -> Step:
    """What this tick does (a fenced daemon does not ask)."""
    def due_since(since: float, moment: float) -> float | None:
        return latest_due(schedule, moment, since=since, anchor=clock.anchor, tz=tz)

    return claimed_clock.decide(_since(clock), clock.claim, now, due_since, later_due_supersedes=True)


def claim(clock: EvolveClock, due: float) -> EvolveClock:
    """The clock to commit before the run for ``due`` acts."""
    return replace(clock, claim=claimed_clock.claim(clock.claim, due))


def run_failed(clock: EvolveClock, now: float, reason: str) -> EvolveClock:
    """The clock after the claimed run could not finish (an actor it asked
    did not answer): run again after the back-off."""
    return replace(clock, claim=claimed_clock.failed(clock.claim, now, reason))


def acknowledge(clock: EvolveClock, due: float, now: float, outcome: str,
                schedule: ParsedSchedule, tz: datetime.tzinfo | None = None) -> EvolveClock:
    """The clock after the run for ``due`` finished, with ``outcome`` said."""
    skipped = _due_times_between(schedule, _since(clock), due, anchor=clock.anchor, tz=tz)
    return replace(clock, claim=NO_CLAIM, acknowledged=due, last_run_at=now, last_outcome=outcome[:MAX_REPORT],
                   coalesced=clock.coalesced + skipped)


def _due_times_between(schedule: ParsedSchedule, since: float, due: float, *, anchor: float,
                       tz: datetime.tzinfo | None) -> int:
    """Due times in (since, due), those that coalesced into ``due``."""
    if schedule.interval_s:
        return max(0, round((due - max(since, anchor)) / schedule.interval_s) - 1)
    count, moment = 0, since
    while count < 400:  # a daily or cron schedule missed 400 times counts as that
        moment = next_due(schedule, moment, anchor=anchor, tz=tz)
        if moment >= due:
            break
        count += 1
    return count


def upcoming(clock: EvolveClock, schedule: ParsedSchedule, now: float,
             tz: datetime.tzinfo | None = None) -> float:
    """When the next run is due: a pending claim at once (or when its
    back-off ends), a due time already passed now; else the next due time."""
    return claimed_clock.upcoming(_since(clock), clock.claim, now,
                                  lambda since: next_due(schedule, since, anchor=clock.anchor, tz=tz))


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
