"""What each way a task attempt ends is worth to the queue (enact.tasks.endings), without an attempt."""

from __future__ import annotations

from pathlib import Path

from enact.cancellation import DAEMON_STOPPING
from enact.messages.reviews import Review, ReviewState
from enact.runtime import CommandRun, RuntimeAuthFailed, RuntimeRateLimited, RuntimeUnavailable
from enact.tasks import endings
from enact.tasks.endings import CANCELLED_BY_OWNER, DEADLINE_EXCEEDED, LEASE_LOST
from enact.tasks.records import FailureClass, Outcome, Phase


def test_each_cancel_reason_ends_as_its_canceller_means() -> None:
    kept = Path("/tmp/wt")
    owner = endings.cancelled(CANCELLED_BY_OWNER, phase=Phase.MODEL, deadline_s=60, kept_at=kept)
    assert owner is not None and owner.outcome is Outcome.CANCELLED and str(kept) in owner.summary
    deadline = endings.cancelled(DEADLINE_EXCEEDED, phase=Phase.MODEL, deadline_s=60, kept_at=None)
    assert deadline is not None and deadline.failure_class is FailureClass.PERMANENT
    assert deadline.summary == "deadline of 60 s exceeded in model"
    stopping = endings.cancelled(DAEMON_STOPPING, phase=Phase.VALIDATE, deadline_s=60, kept_at=kept)
    assert stopping is not None and stopping.outcome is Outcome.INTERRUPTED


def test_a_lost_lease_ends_the_attempt_without_a_finish() -> None:
    assert endings.cancelled(LEASE_LOST, phase=Phase.MODEL, deadline_s=60, kept_at=None) is None


def test_runtime_failures_are_classed_by_kind() -> None:
    assert endings.runtime_failed(RuntimeAuthFailed("no")).failure_class is FailureClass.AUTH
    limited = endings.runtime_failed(RuntimeRateLimited("slow down", retry_after_s=30.0))
    assert limited.failure_class is FailureClass.TRANSIENT and limited.retry_after_s == 30.0
    assert endings.runtime_failed(RuntimeUnavailable("gone")).failure_class is FailureClass.TRANSIENT


def test_an_unexpected_error_is_transient_only_when_it_may_pass() -> None:
    assert endings.unexpected(OSError("disk full")).failure_class is FailureClass.TRANSIENT
    assert endings.unexpected(KeyError("bug")).failure_class is FailureClass.PERMANENT


def test_nothing_could_run_names_the_first_three_commands() -> None:
    commands = [CommandRun(command=f"tool {n}", exit_code=127) for n in range(5)]
    ending = endings.nothing_could_run("codex", commands)
    assert ending.outcome is Outcome.FAILED and not ending.keep_worktree
    assert "(5)" in ending.summary and "tool 2" in ending.summary and "tool 3" not in ending.summary
    assert ending.summary.endswith(" and 2 more")


def _review(state: ReviewState) -> Review:
    return Review(id=7, task_id=1, repo="/r", branch="b", base="a", head="c", diffstat="", doctor_summary="",
                  state=state, created_at=0.0, updated_at=0.0)


def test_an_earlier_attempts_review_ends_the_task_without_redoing_it() -> None:
    opened = endings.handed_over_before(_review(ReviewState.OPEN))
    assert opened.outcome is Outcome.SUCCEEDED and opened.review_id == "7" and not opened.keep_worktree
    closed = endings.handed_over_before(_review(ReviewState.CLOSED))
    assert closed.outcome is Outcome.CANCELLED and closed.review_id == "7"


def test_an_earlier_attempts_review_is_named_by_the_line_that_shows_the_summary_not_again_in_it() -> None:
    # `task watch` says "task 1 succeeded, review 7: <summary>": the summary must not say "review 7" again.
    for state in (ReviewState.OPEN, ReviewState.CLOSED):
        assert "review 7" not in endings.handed_over_before(_review(state)).summary
