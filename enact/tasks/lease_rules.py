"""What a running task becomes when its attempt ends: finished by its worker
(``after_finish``), or its lease run out before a worker said so
(``after_lease_expired``). Plain rules over a ``Task`` and the time;
``enact.tasks.queue`` stores what they return and records it as the event
they name.

How the worker decides the outcome of its attempt is ``enact.tasks.endings``;
this is what the queue makes of it.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from enact.messages.tasks import Finish
from enact.tasks.records import (
    MAX_ATTEMPTS,
    WORKER_LOST,
    EventKind,
    FailureClass,
    Outcome,
    Phase,
    Task,
    TaskState,
    clip,
    resume_hint,
    retry_delay_s,
)

_FINISHED_STATE = {Outcome.SUCCEEDED: TaskState.SUCCEEDED, Outcome.CANCELLED: TaskState.CANCELLED,
                   Outcome.PAUSED: TaskState.PAUSED, Outcome.FAILED: TaskState.FAILED}


class Transition(NamedTuple):
    """The task after the change, and the event that records it."""

    task: Task
    kind: EventKind
    summary: str


def lease_lapsed(task: Task, now: float) -> bool:
    """Whether a running task's lease has run out at ``now``: the one rule
    the sweep and every lease holder's message are judged by."""
    return task.lease_expires_at is not None and task.lease_expires_at <= now


def after_finish(task: Task, message: Finish, now: float) -> Transition:
    """The task after its worker's ``Finish`` for the attempt it holds."""
    base = dataclasses.replace(
        task, worker="", lease_expires_at=None, phase=Phase.NONE, repair=0, cancel_requested=False,
        confined=task.confined if message.confined is None else message.confined,
        worktree=message.worktree or task.worktree, review_id=message.review_id or task.review_id,
        failure_class=message.failure_class, summary=clip(message.summary), updated_at=now)
    outcome = message.outcome
    if outcome is Outcome.FAILED and message.failure_class in (FailureClass.AUTH, FailureClass.BUDGET):
        outcome = Outcome.PAUSED
    if task.cancel_requested and _hands_back(outcome, message.failure_class):
        # The owner's cancel was accepted before the worker heard of
        # it (a graceful stop, say, came first): it still stands.
        ended = dataclasses.replace(base, state=TaskState.CANCELLED, failure_class=None, finished_at=now,
                                    summary=clip(f"cancelled by its owner; {message.summary}"))
        return Transition(ended, EventKind.CANCELLED, ended.summary)
    if outcome is Outcome.INTERRUPTED:
        # A graceful stop is no failure of the task. A kill -9 still
        # counts: its lease just expires, which nothing can tell
        # apart from the attempt itself crashing the daemon.
        queued = dataclasses.replace(base, state=TaskState.QUEUED, attempt=task.attempt + 1,
                                     uncounted_attempts=task.uncounted_attempts + 1, failure_class=None,
                                     not_before=0.0)
        return Transition(queued, EventKind.INTERRUPTED, message.summary)
    if outcome is Outcome.PAUSED:
        paused = dataclasses.replace(base, state=TaskState.PAUSED,
                                     summary=clip(f"{message.summary or 'paused'}; {resume_hint(task)}"))
        return Transition(paused, EventKind.PAUSED, paused.summary)
    if outcome is Outcome.FAILED and message.failure_class is FailureClass.TRANSIENT \
            and task.counted_attempts < MAX_ATTEMPTS:
        delay = max(retry_delay_s(task.attempt), message.retry_after_s or 0.0)
        queued = dataclasses.replace(base, state=TaskState.QUEUED, attempt=task.attempt + 1, not_before=now + delay)
        return Transition(queued, EventKind.RETRYING, f"{message.summary}; retrying in {delay:.0f} s")
    state = _FINISHED_STATE[outcome]
    ended = dataclasses.replace(base, state=state, finished_at=now)
    return Transition(ended, EventKind(state.value), ended.summary)


def after_lease_expired(task: Task, now: float) -> Transition:
    """The running task whose lease ran out: back to the queue (attempt + 1),
    or failed ``worker-lost`` after its last attempt, or cancelled if its
    owner asked."""
    lost = f"the lease of {task.worker} expired (attempt {task.attempt})"
    base = dataclasses.replace(task, worker="", lease_expires_at=None, phase=Phase.NONE, repair=0, updated_at=now)
    if task.cancel_requested:
        ended = dataclasses.replace(base, state=TaskState.CANCELLED, finished_at=now, summary=f"cancelled; {lost}")
        return Transition(ended, EventKind.CANCELLED, ended.summary)
    if task.counted_attempts >= MAX_ATTEMPTS:
        ended = dataclasses.replace(base, state=TaskState.FAILED, finished_at=now,
                                    failure_class=FailureClass.PERMANENT,
                                    summary=f"{WORKER_LOST}: {lost}, after {task.attempt} attempts")
        return Transition(ended, EventKind.FAILED, ended.summary)
    queued = dataclasses.replace(base, state=TaskState.QUEUED, attempt=task.attempt + 1)
    return Transition(queued, EventKind.LEASE_EXPIRED, lost)


def _hands_back(outcome: Outcome, failure_class: FailureClass | None) -> bool:
    """Whether an attempt ending so leaves its task to run again (queued
    again or paused for a resume) rather than ending it."""
    return outcome in (Outcome.INTERRUPTED, Outcome.PAUSED) or (
        outcome is Outcome.FAILED and failure_class is FailureClass.TRANSIENT)
