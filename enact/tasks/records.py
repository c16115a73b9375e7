"""The task queue's records: a task, its lifecycle events, and the limits
and rules every party of the queue protocol shares (the queue, its workers,
the CLI, chat).

A task is stored as the ``Task`` the queue answers with, so a worker in
another process gets the same record over the wire as the actor holds.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.spoken import Audience, command

MAX_REQUEST = 20_000
MAX_BRIEF = 3_000
MAX_SUMMARY = 500
"""How much of a summary an event or a task keeps."""
MAX_KEY = 512
MAX_ALLOW_PATHS = 32
MAX_ALLOW_PATH = 256

REPAIRS_DEFAULT = 2
REPAIRS_RANGE = (0, 5)
DEADLINE_DEFAULT_S = 600
DEADLINE_RANGE_S = (60, 7_200)

LEASE_TTL_DEFAULT_S = 60.0
MAX_ATTEMPTS = 3
"""Attempts a task gets before a lost worker or a transient failure fails it
(``Task.counted_attempts``)."""
RETRY_BASE_S = 30.0
RETRY_CAP_S = 300.0

WORKER_LOST = "worker-lost"
TASKS_DIR = "tasks"
LOG_NAME = "task.log"


class TaskState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"

    @property
    def ended(self) -> bool:
        """Succeeded, failed or cancelled: only a retry (a new task) runs it
        again. A paused task has not ended: it waits for its owner."""
        return self in _ENDED

    @property
    def as_told(self) -> str:
        """The state as a sentence says it after "task 5": "is queued", but
        "succeeded" and "was cancelled", never "is succeeded"."""
        return {TaskState.SUCCEEDED: "succeeded", TaskState.FAILED: "failed",
                TaskState.CANCELLED: "was cancelled"}.get(self, f"is {self.value}")


_ENDED = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})


class Outcome(enum.StrEnum):
    """How a worker says an attempt ended (``tasks.Finish``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"
    INTERRUPTED = "interrupted"
    """The daemon stopped gracefully mid-attempt: queued again, not counted."""


class FailureClass(enum.StrEnum):
    """What a failed attempt means for the task: transient failures (rate
    limit, runtime unavailable, network) are retried with back-off;
    permanent ones (validation failed after repairs, protected path changed,
    merge conflict, invalid request, deadline exceeded) fail it; ``auth``
    pauses it until its owner resumes it, ``budget`` until the budget's
    day starts again or its owner resumes it."""

    TRANSIENT = "transient"
    PERMANENT = "permanent"
    AUTH = "auth"
    BUDGET = "budget"
    """The day's task budget is spent: paused until the budget's reset
    resumes it (or its owner does)."""


class Phase(enum.StrEnum):
    """Where a running task is; ``repair`` is shown with its count (``repair 1/2``)."""

    NONE = ""
    WORKSPACE = "workspace"
    MODEL = "model"
    VALIDATE = "validate"
    REPAIR = "repair"
    CAPTURE = "capture"
    REVIEW = "review"


class EventKind(enum.StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    PHASE = "phase"
    LEASE_EXPIRED = "lease-expired"
    RETRYING = "retrying"
    VALIDATED = "validated"
    REPAIRED = "repaired"
    CAPTURED = "captured"
    REVIEW_OPENED = "review-opened"
    CANCEL_REQUESTED = "cancel-requested"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PAUSED = "paused"
    RESUMED = "resumed"
    INTERRUPTED = "interrupted"


WORKER_EVENTS = frozenset({EventKind.PHASE, EventKind.VALIDATED, EventKind.REPAIRED, EventKind.CAPTURED,
                           EventKind.REVIEW_OPENED})
"""The events a worker may report with ``tasks.ReportPhase``; the others are the queue's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRef:
    """The chat conversation a task came from: where its outcome is told."""

    channel: str
    conversation: str
    session_key: str = ""
    """The conversation's runtime session, which gets a note of the outcome."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    id: int
    request: str
    brief: str
    repo: str
    origin: str
    idempotency_key: str
    repairs: int
    deadline_s: int
    attempt: int
    """1 for the first run; a lost lease or a transient failure adds one."""
    parent: int | None
    state: TaskState
    phase: Phase
    repair: int
    """The repair round running (with ``phase`` ``repair``), else 0."""
    confined: bool | None
    """Whether the worker ran it confined; None until a worker says."""
    review_id: str
    worktree: str
    conversation: ConversationRef | None
    worker: str
    """The worker holding the lease while running; "" otherwise."""
    lease_expires_at: float | None
    cancel_requested: bool
    not_before: float
    """A queued task retried after a transient failure waits until then."""
    failure_class: FailureClass | None
    summary: str
    """The latest outcome or failure, bounded."""
    created_at: float
    updated_at: float
    started_at: float | None
    """When the current attempt was claimed."""
    finished_at: float | None
    uncounted_attempts: int = 0
    """Attempts that do not count against ``MAX_ATTEMPTS``: interrupted by
    a graceful stop, or paused and resumed by the owner."""
    allow_paths: tuple[str, ...] = ()
    """Protected paths the owner unlocked for this task (``--allow-path``;
    see ``enact.tasks.protected``): set only by the owner's own CLI."""
    allow_fewer_tests: bool = False
    """The owner's leave for the change to run fewer of the tests its base
    ran (``--allow-fewer-tests``); same authority."""

    @property
    def counted_attempts(self) -> int:
        return self.attempt - self.uncounted_attempts

    @property
    def progress(self) -> str:
        """The phase as shown: ``model``, ``repair 1/2``, or "" when not running."""
        if self.phase is Phase.REPAIR:
            return f"repair {self.repair}/{self.repairs}"
        return str(self.phase)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent:
    """One change of a task, as ``tasks.events`` stores it; its cursor is its key."""

    task_id: int
    kind: EventKind
    time: float
    worker: str
    attempt: int
    summary: str
    state: TaskState
    """The task's state after the change."""


MAX_EXPERIENCE_REQUEST = 1_000
MAX_EXPERIENCE_FILES = 50
MAX_DIFFSTAT = 2_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Experience:
    """What a task that succeeded with a change leaves for the evidence
    scanner (``experience:<task id>``): what was asked, what changed, how
    the doctor found it and what it took. The worker says what it saw; the
    queue fills in what it knows itself (the task, its attempt, its review)
    when it stores the record, in the commit that ends the task."""

    task_id: int = 0
    request: str = ""
    """The task's request, clipped to ``MAX_EXPERIENCE_REQUEST``."""
    files: tuple[str, ...] = ()
    """The changed paths, the first ``MAX_EXPERIENCE_FILES``."""
    files_changed: int = 0
    """How many paths changed, also past the ones listed."""
    diffstat: str = ""
    doctor: str = ""
    """The doctor's one-line summary of the run that passed."""
    tests_passed: int = 0
    tests_failed: int = 0
    tests_skipped: int = 0
    repairs: int = 0
    """Repair rounds the change took before the doctor passed it."""
    attempt: int = 0
    review_id: str = ""
    finished_at: float = 0.0

    def bounded(self) -> Experience:
        """The record within its limits, whoever made it."""
        files = tuple(clip(path, MAX_ALLOW_PATH) for path in self.files[:MAX_EXPERIENCE_FILES])
        return replace(self, request=clip(self.request, MAX_EXPERIENCE_REQUEST), files=files,
                       files_changed=max(self.files_changed, len(self.files)),
                       diffstat=clip(self.diffstat, MAX_DIFFSTAT), doctor=clip(self.doctor),
                       review_id=clip(self.review_id, MAX_KEY))


def clip(text: str, limit: int = MAX_SUMMARY) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_delay_s(attempt: int) -> float:
    """The back-off before retrying after ``attempt`` failed transiently:
    min(300 s, 30 s * 2^(attempt - 1))."""
    return min(RETRY_CAP_S, RETRY_BASE_S * float(2 ** max(0, attempt - 1)))


def check_limits(*, request: str, brief: str, repairs: int, deadline_s: int,
                 allow_paths: tuple[str, ...] = ()) -> str | None:
    """Why a submission is refused, in one line; None when it is acceptable."""
    if len(allow_paths) > MAX_ALLOW_PATHS:
        return f"at most {MAX_ALLOW_PATHS} paths are unlocked for one task, not {len(allow_paths)}"
    if any(not path.strip() or len(path) > MAX_ALLOW_PATH for path in allow_paths):
        return f"an unlocked path is a pattern of 1 to {MAX_ALLOW_PATH} characters"
    why = check_request(request, brief)
    if why is not None:
        return why
    low, high = REPAIRS_RANGE
    if not low <= repairs <= high:
        return f"repairs must be between {low} and {high}, not {repairs}"
    low, high = DEADLINE_RANGE_S
    if not low <= deadline_s <= high:
        return f"the deadline must be between {low} and {high} seconds, not {deadline_s}"
    return None


def check_request(request: str, brief: str = "") -> str | None:
    """Why a task's request (and brief) cannot be queued, None when it can."""
    if not request.strip():
        return "a task needs a request (what should be done)"
    if len(request) > MAX_REQUEST:
        return f"the request is {len(request)} characters; at most {MAX_REQUEST} are accepted"
    if len(brief) > MAX_BRIEF:
        return f"the brief is {len(brief)} characters; at most {MAX_BRIEF} are accepted"
    # A request is kept and shown (task show, the review branch's commit
    # message, the worker's prompt): a credential in it would be too.
    from enact.credentials import find_credential  # here: its patterns cost every reader of a task a start-up

    for part, text in (("request", request), ("brief", brief)):
        kind = find_credential(text)
        if kind is not None:
            return (f"the {part} contains a credential ({kind}); a task's request is kept and shown, so give "
                    "the task the secret another way (an environment variable, a file outside the repository)")
    return None


def task_dir(home: Path, task_id: int) -> Path:
    return home / TASKS_DIR / str(task_id)


def task_log_path(home: Path, task_id: int) -> Path:
    """Where the worker writes a task's full log (model progress, doctor
    output), which ``enact task log ID`` prints: ``$ENACT_HOME/tasks/<id>/task.log``."""
    return task_dir(home, task_id) / LOG_NAME


def resume_hint(task: Task) -> str:
    """Said where the task's owner asked for it (a paused task's summary, and its notice)."""
    audience = Audience.of(task.origin, in_conversation=task.conversation is not None)
    resume = command("task.resume", "task resume", task.id).to(audience)
    return f"run `{resume}` once the runtime's credentials work again"
