"""The claimed clock: how a schedule acts once per due time although the
daemon may stop at any moment. Cron (``enact.tasks.scheduling``) and the
evolve schedule (``enact.evolution.schedule``) both follow it; they differ
only in how a due time is computed and in what acting means.

The state is the latest due time handled (``since``: or the schedule's
anchor before the first), which each schedule keeps in its own terms, and,
between the two commits that bracket an action, an open claim
(``ClaimState``, nested as it is in each schedule's record). Each tick:

- nothing has come due since the last handled due time: nothing to do;
- a due time has come: *claim* it, committed before acting; any number of
  due times missed meanwhile coalesce into the latest;
- a claim is open (the daemon died while acting, or the action failed): act
  on it again under the same due time, so that an action keyed by it finds
  its earlier effect instead of repeating it; after a failure only once the
  back-off (``RETRIES``, the project's one policy) has passed, and once
  ``RETRIES.attempts`` attempts have not finished the claim is *given up*:
  acknowledged as failed with its reason, so the next due time still runs;
- after acting, the claim is *acknowledged*: its due time is handled.

A schedule whose runs are safe to repeat under a new due time may let a
later due time supersede an open claim (``later_due_supersedes``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from enact.frozen_dataclass import dataclass
from enact.retry import Backoff

RETRIES = Backoff(first_s=30.0, factor=2.0, max_s=900.0, attempts=5)
"""Attempts at one claimed due time: 30 s, 1 min, 2 min, 4 min apart."""
MAX_REASON = 500

LatestDue = Callable[[float, float], "float | None"]
"""``latest_due(since, now)``: the latest due time in (since, now], or None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimState:
    """The open claim, stored nested in each schedule's record (``claim``);
    the latest due time handled (``since`` to the functions below) is kept
    by each schedule in its own terms."""

    claimed: float | None = None
    """A due time claimed and not acknowledged."""
    attempts: int = 0
    """Attempts started at the claimed due time."""
    retry_at: float | None = None
    """After a failed attempt: not before this moment. None: at once (an
    attempt found unfinished was cut short by a stop)."""
    failure: str = ""
    """Why the latest attempt failed."""


NO_CLAIM = ClaimState()
_FLAT_FIELDS = ("claimed", "attempts", "retry_at", "failure")


def nest_flat_claim(document: dict[str, Any]) -> dict[str, Any]:
    """A stored schedule document with the claim's fields nested under
    ``claim``: records written before the claim was nested kept them flat."""
    if "claim" in document or not any(name in document for name in _FLAT_FIELDS):
        return document
    rest = {name: value for name, value in document.items() if name not in _FLAT_FIELDS}
    return {**rest, "claim": {name: document[name] for name in _FLAT_FIELDS if name in document}}


class Decision(enum.Enum):
    NOTHING_DUE = "nothing-due"
    CLAIM = "claim"
    """A due time has come: claim it, then act."""
    RERUN = "rerun"
    """Act again on the open claim, under its due time."""
    WAIT = "wait"
    """The open claim's last attempt failed; its back-off has not passed."""
    GIVE_UP = "give-up"
    """The open claim used its attempts: acknowledge it as failed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    decision: Decision
    due: float | None = None
    reason: str = ""
    """For GIVE_UP: why the claim failed, to be recorded with it."""


def decide(since: float, state: ClaimState, now: float, latest_due: LatestDue, *,
           later_due_supersedes: bool = False) -> Step:
    """What this tick does with the schedule whose latest handled due time
    is ``since`` and whose claim is ``state``."""
    due = latest_due(since, now)
    claimed = state.claimed
    if claimed is not None and not (later_due_supersedes and due is not None and due > claimed):
        if RETRIES.exhausted(state.attempts):
            why = state.failure or "did not finish (the daemon stopped during it)"
            return Step(decision=Decision.GIVE_UP, due=claimed,
                        reason=f"given up after {state.attempts} attempts: {why}"[:MAX_REASON])
        if state.retry_at is not None and now < state.retry_at:
            return Step(decision=Decision.WAIT, due=claimed)
        return Step(decision=Decision.RERUN, due=claimed)
    if due is None:
        return Step(decision=Decision.NOTHING_DUE)
    return Step(decision=Decision.CLAIM, due=due)


def claim(state: ClaimState, due: float) -> ClaimState:
    """The claim to commit before an attempt at ``due`` starts."""
    if state.claimed == due:
        return replace(state, attempts=state.attempts + 1, retry_at=None)
    return ClaimState(claimed=due, attempts=1)


def failed(state: ClaimState, now: float, reason: str) -> ClaimState:
    """The claim after its attempt failed with ``reason`` (it stays open, to
    be tried again after the back-off)."""
    return replace(state, retry_at=now + RETRIES.delay(state.attempts), failure=reason[:MAX_REASON])


def upcoming(since: float, state: ClaimState, now: float, next_due: Callable[[float], float]) -> float:
    """When the schedule acts next: an open claim at once or when its
    back-off ends, a due time already come at once, else ``next_due(since)``."""
    if state.claimed is not None:
        return max(now, state.retry_at) if state.retry_at is not None else now
    return max(now, next_due(since))
