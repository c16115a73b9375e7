"""The task queue protocol (actor ``tasks``).

Owners submit, cancel, retry, resume and read tasks; workers claim a task
under a lease, renew it with heartbeats, report each phase and finish. A
worker's messages carry its worker id and the attempt it holds, and every
reply carries the records themselves, so a worker in another process (or on
another machine) can speak the same protocol. A worker message from anyone
but the lease's holder, for the attempt it holds, is answered ``LeaseLost``
and changes nothing.
"""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import Done, NotFound, Origin, Refused
from enact.tasks.records import (
    DEADLINE_DEFAULT_S,
    MAX_ALLOW_PATHS,
    MAX_BRIEF,
    MAX_KEY,
    MAX_REQUEST,
    REPAIRS_DEFAULT,
    ConversationRef,
    EventKind,
    Experience,
    FailureClass,
    Outcome,
    Phase,
    Task,
    TaskEvent,
    TaskState,
)

MAX_PAGE = 1_000
_TEXT = 4_000
_ID = 256

# -- owners --------------------------------------------------------------


@request("tasks.Submit")
@dataclass(frozen=True, slots=True, kw_only=True)
class Submit(Request["Submitted | Refused"]):
    """Queue a task. With an ``idempotency_key`` already used, the task
    submitted under it is returned (``existing``) and nothing is queued."""

    request: str = field(metadata=limit(MAX_REQUEST))
    brief: str = field(default="", metadata=limit(MAX_BRIEF + 1))
    repo: str = field(default="", metadata=limit(_TEXT))
    """A local git repository; "" for ``tasks.default_repo``."""
    origin: Origin
    idempotency_key: str = field(default="", metadata=limit(MAX_KEY))
    """"" for a fresh key; chat derives it from the event identity, cron
    from the schedule and its due time."""
    repairs: int = REPAIRS_DEFAULT
    deadline_s: int = DEADLINE_DEFAULT_S
    parent: int | None = None
    conversation: ConversationRef | None = None
    allow_paths: tuple[str, ...] = field(default=(), metadata=limit(MAX_ALLOW_PATHS + 1))
    """Protected paths unlocked for the task; only the owner's CLI
    (``human-cli``) may: from any other origin the submission is refused."""
    allow_fewer_tests: bool = False
    """Same authority: the change may run fewer of the base's tests."""


@reply("tasks.Submitted")
@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    task: Task
    existing: bool


@request("tasks.Cancel")
@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel(Request["CancelAccepted | NotFound | Refused"]):
    """End a queued or paused task at once; mark a running one for a
    cooperative cancel, which its worker learns from its next heartbeat's
    ``LeaseRenewed(cancel_requested=True)``."""

    task_id: int
    origin: Origin


@reply("tasks.CancelAccepted")
@dataclass(frozen=True, slots=True, kw_only=True)
class CancelAccepted:
    task: Task
    at_once: bool
    """False: the task was running and ends once its worker stops."""


@request("tasks.Retry")
@dataclass(frozen=True, slots=True, kw_only=True)
class Retry(Request["Submitted | NotFound | Refused"]):
    """Queue a child of a failed or cancelled task with its request, brief
    and provenance (``parent`` is the retried task)."""

    task_id: int
    origin: Origin


@request("tasks.Resume")
@dataclass(frozen=True, slots=True, kw_only=True)
class Resume(Request["Resumed | NotFound | Refused"]):
    """Queue a paused task again, under its own id."""

    task_id: int
    origin: Origin


@internal("tasks.ResumeAfterBudget")
@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeAfterBudget:
    """The budget's day started again (told by the budget actor): queue
    again every task paused because the task budget was spent."""


@reply("tasks.Resumed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed:
    task: Task


@request("tasks.Get")
@dataclass(frozen=True, slots=True, kw_only=True)
class Get(Request["Found | NotFound"]):
    task_id: int


@reply("tasks.Found")
@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    task: Task


@request("tasks.GetByKey", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class GetByKey(Request["Found | NotFound"]):
    """The task submitted under ``idempotency_key``: how a submitter whose
    Submit went unanswered learns whether it was queued all the same."""

    idempotency_key: str = field(metadata=limit(MAX_KEY))


@request("tasks.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["TaskPage"]):
    """Tasks newest first, optionally of one state; page on with ``before``
    (the ``next_before`` of the previous page)."""

    state: TaskState | None = None
    limit: int = 20
    before: int | None = None


@reply("tasks.TaskPage")
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPage:
    tasks: tuple[Task, ...]
    next_before: int | None
    """None: this page is the last."""


@request("tasks.Events")
@dataclass(frozen=True, slots=True, kw_only=True)
class Events(Request["EventPage | NotFound"]):
    """Lifecycle events after ``cursor`` (0: from the first), oldest first,
    of one task or (``task_id`` None) of all; complete, never capped: page on
    with ``next_cursor``."""

    task_id: int | None
    cursor: int = 0
    limit: int = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class EventAt:
    cursor: int
    event: TaskEvent


@reply("tasks.EventPage")
@dataclass(frozen=True, slots=True, kw_only=True)
class EventPage:
    events: tuple[EventAt, ...]
    next_cursor: int
    more: bool


@request("tasks.ChangedSince", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class ChangedSince(Request["ChangedTasks"]):
    """The tasks with an event after ``after`` (an event cursor), up to
    ``limit`` of them, each with all its events; read from the event log by
    cursor, so the cost follows what is new, not the history."""

    after: int = 0
    limit: int = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSnapshot:
    task: Task
    events: tuple[EventAt, ...]
    """Oldest first; the last is the task's latest event."""
    experience: Experience | None = None
    """The experience record a task that succeeded with a change left."""


@reply("tasks.ChangedTasks")
@dataclass(frozen=True, slots=True, kw_only=True)
class ChangedTasks:
    tasks: tuple[TaskSnapshot, ...]
    """Ordered by each task's latest event."""
    next_cursor: int
    """Read on from here: every event up to it belongs to a task above."""
    more: bool


@request("tasks.Leases")
@dataclass(frozen=True, slots=True, kw_only=True)
class Leases(Request["LeaseTable"]):
    """Who holds which task now (for ``enact status``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    task_id: int
    worker_id: str
    attempt: int
    expires_at: float
    progress: str
    started_at: float


@reply("tasks.LeaseTable")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTable:
    leases: tuple[Lease, ...]
    queued: int
    """Tasks waiting, due or backing off."""


# -- workers -------------------------------------------------------------


@request("tasks.Claim", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(Request["Claimed | NothingQueued"]):
    """Take the oldest due queued task under a lease."""

    worker_id: str = field(metadata=limit(_ID))


@reply("tasks.Claimed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    task: Task
    """Everything the worker needs: request, brief, repo, repairs, deadline,
    attempt (send it back with every message), conversation."""
    lease_expires_at: float
    lease_ttl_s: float
    """Heartbeat well within this (a third of it is a good period)."""


@reply("tasks.NothingQueued")
@dataclass(frozen=True, slots=True, kw_only=True)
class NothingQueued:
    next_due_in_s: float | None
    """When the earliest backing-off task becomes due; None if none waits."""


@request("tasks.Heartbeat", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Request["LeaseRenewed | LeaseLost"]):
    task_id: int
    worker_id: str = field(metadata=limit(_ID))
    attempt: int


@reply("tasks.LeaseRenewed")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRenewed:
    lease_expires_at: float
    cancel_requested: bool
    """The owner cancelled the task: stop (kill the runtime and the doctor
    with their process groups) and ``Finish`` with outcome ``cancelled``."""


@reply("tasks.LeaseLost")
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseLost:
    """This worker no longer holds the task (its lease expired, or another
    attempt runs it): stop without touching the task's records."""

    task_id: int
    reason: str


@request("tasks.ReportPhase", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class ReportPhase(Request["Done | LeaseLost"]):
    """The task entered ``phase`` (``repair`` with its round in ``repair``),
    or passed a milestone (``event`` validated, repaired, captured,
    review-opened); renews the lease like a heartbeat."""

    task_id: int
    worker_id: str = field(metadata=limit(_ID))
    attempt: int
    phase: Phase
    repair: int = 0
    event: EventKind = EventKind.PHASE
    summary: str = field(default="", metadata=limit(_TEXT))
    confined: bool | None = None
    """Whether the runtime and doctor run confined; None: unchanged."""
    worktree: str = field(default="", metadata=limit(_TEXT))
    """The task's worktree once prepared; "": unchanged."""
    review_id: str = field(default="", metadata=limit(_ID))


@request("tasks.Finish", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Finish(Request["Done | LeaseLost"]):
    """The attempt ended. ``failed`` with ``transient`` is retried with
    back-off while attempts remain; ``permanent`` fails the task; ``auth``
    (or outcome ``paused``) pauses it until ``task resume``."""

    task_id: int
    worker_id: str = field(metadata=limit(_ID))
    attempt: int
    outcome: Outcome
    failure_class: FailureClass | None = None
    summary: str = field(default="", metadata=limit(_TEXT))
    review_id: str = field(default="", metadata=limit(_ID))
    worktree: str = field(default="", metadata=limit(_TEXT))
    confined: bool | None = None
    retry_after_s: float | None = None
    """A rate limit's own wait, used when longer than the back-off."""
    experience: Experience | None = None
    """With ``succeeded`` after a change: what the worker saw of it, kept
    as the task's experience record."""


# -- the queue itself ----------------------------------------------------


@internal("tasks.ExpireLeases")
@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireLeases:
    """The queue's own timer: expire leases not renewed within their TTL."""


@reply("tasks.TaskChanged")
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskChanged:
    """Published after every committed change of a task."""

    task: Task
    event: EventAt

