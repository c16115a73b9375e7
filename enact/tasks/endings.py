"""How a task attempt ends: the outcome, failure class and summary that each
way of ending means. ``enact.tasks.worker`` finds out how its attempt ended;
this says what that is worth to the queue.

A cancellation's reason says who cancelled: the owner (outcome
``cancelled``), the deadline (failed, permanent), the daemon stopping
gracefully (``interrupted``: queued again without counting the attempt); any
other (a lost lease, a fence) ends the attempt without a Finish from this
worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from enact.actors._asks import ActorUnavailable
from enact.cancellation import DAEMON_STOPPING
from enact.frozen_dataclass import dataclass
from enact.messages.reviews import Review, ReviewState
from enact.runtime import CommandRun, RuntimeAuthFailed, RuntimeFailure, RuntimeOverBudget, RuntimeRateLimited
from enact.tasks.doctor import DoctorResult
from enact.tasks.records import Experience, FailureClass, Outcome, Phase

CANCELLED_BY_OWNER = "cancelled by the owner"
DEADLINE_EXCEEDED = "deadline exceeded"
LEASE_LOST = "lease lost"


@dataclass(frozen=True, slots=True)
class Ending:
    outcome: Outcome
    summary: str
    failure_class: FailureClass | None = None
    retry_after_s: float | None = None
    review_id: str = ""
    keep_worktree: bool = True
    experience: Experience | None = None


def cancelled(reason: str | None, *, phase: Phase, deadline_s: float, kept_at: Path | None) -> Ending | None:
    """The ending a cancel with ``reason`` means, in ``phase``; None when the
    attempt is no longer this worker's to finish (a lost lease, a fence)."""
    where = f"; its worktree is kept at {kept_at}" if kept_at is not None else ""
    if reason == CANCELLED_BY_OWNER:
        return Ending(Outcome.CANCELLED, f"cancelled by the owner{where}")
    if reason == DEADLINE_EXCEEDED:
        return Ending(Outcome.FAILED, f"deadline of {deadline_s} s exceeded in {phase.value}{where}",
                      FailureClass.PERMANENT)
    if reason == DAEMON_STOPPING:  # handed back: the next daemon runs it again
        return Ending(Outcome.INTERRUPTED, f"interrupted in {phase.value}: {DAEMON_STOPPING}")
    return None


def handed_over_before(review: Review) -> Ending:
    """An earlier attempt opened ``review`` and died before its Finish: the
    work is not redone. Closed, the owner turned the work down, so the task
    ends as cancelled by its owner (terminal, never retried by itself;
    ``task retry`` makes a new one)."""
    if review.state is ReviewState.CLOSED:
        return Ending(Outcome.CANCELLED, "the owner closed its review (an earlier attempt opened it); "
                                         "the work is not redone", review_id=str(review.id), keep_worktree=False)
    # Not "review N ...": every line that shows the summary names the task's review beside it.
    return Ending(Outcome.SUCCEEDED, "its review was opened by an earlier attempt",
                  review_id=str(review.id), keep_worktree=False)


def runtime_failed(error: RuntimeFailure) -> Ending:
    if isinstance(error, RuntimeOverBudget):
        # Paused, not failed: the budget's reset queues it again (or its owner does).
        return Ending(Outcome.FAILED, f"paused for budget: {error}", FailureClass.BUDGET)
    if isinstance(error, RuntimeAuthFailed):
        return Ending(Outcome.FAILED, f"the runtime refused its credentials: {error}", FailureClass.AUTH)
    if isinstance(error, RuntimeRateLimited):
        return Ending(Outcome.FAILED, f"rate limited: {error}", FailureClass.TRANSIENT,
                      retry_after_s=error.retry_after_s)
    # Unavailable, timed out, malformed output or a failed call: the
    # runtime or its network, worth another attempt after a while.
    return Ending(Outcome.FAILED, f"the runtime failed ({error.kind}): {error}", FailureClass.TRANSIENT)


def unexpected(error: BaseException) -> Ending:
    """An error no step expected (a bug, a full disk): a full disk or a lost
    actor may pass, anything else would fail again."""
    transient = isinstance(error, OSError | ActorUnavailable)
    return Ending(Outcome.FAILED, f"{type(error).__name__}: {error}",
                  FailureClass.TRANSIENT if transient else FailureClass.PERMANENT)


def nothing_could_run(runtime: str, commands: Sequence[CommandRun]) -> Ending:
    """No change, and every command the model ran failed: the runtime could
    not work here (a sandbox helper missing, a tool that does not start),
    which "no changes" would hide."""
    failed = "; ".join(command.describe() for command in commands[:3])
    more = f" and {len(commands) - 3} more" if len(commands) > 3 else ""
    return Ending(Outcome.FAILED, f"no changes, and every command the {runtime} runtime ran failed "
                                  f"({len(commands)}): {failed}{more}", FailureClass.PERMANENT, keep_worktree=False)


def validation_failed(result: DoctorResult, *, repaired: int, repairs: int, kept_at: Path) -> Ending:
    why = (f"validation failed after {repaired} of {repairs} repairs: {result.summary}"
           if not result.protected_changed else result.summary)
    return Ending(Outcome.FAILED, f"{why}; the worktree is kept at {kept_at}", FailureClass.PERMANENT)


def rewritten_by_tests(kept_at: Path) -> Ending:
    """The test run itself rewrote what it validated: what would be committed
    is not what passed."""
    return Ending(Outcome.FAILED, f"the test run changed the files it validated; the worktree is kept at "
                                  f"{kept_at}", FailureClass.PERMANENT)


def experience_of(changed: Sequence[str], diffstat: str, result: DoctorResult, *, repairs: int) -> Experience:
    """What the worker saw of a change the doctor passed, for its task's
    experience record (the queue adds the task, its attempt and its review)."""
    tests = result.tests
    return Experience(files=tuple(changed), files_changed=len(changed), diffstat=diffstat, doctor=result.summary,
                      tests_passed=len(tests.passed) if tests else 0,
                      tests_failed=len(tests.failed) + len(tests.errors) if tests else 0,
                      tests_skipped=len(tests.skipped) if tests else 0, repairs=repairs).bounded()
