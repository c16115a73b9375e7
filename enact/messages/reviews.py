"""The reviews protocol: a task's captured branch, waiting for its owner.

A worker opens a review when it has committed a task's change; only a human
(the owner's CLI, or the owner's locked chat) lands or closes it. One task
has at most one review: opening again for the same task (a task that ran
again after a crash) answers the existing review instead of a second one.
"""

from __future__ import annotations

import enum
from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import NotFound, Origin, Refused

MAX_PATH = 4096
MAX_REVISION = 64
MAX_SUMMARY = 8000
MAX_LIST = 1000


class ReviewState(enum.Enum):
    OPEN = "open"
    LANDED = "landed"
    CLOSED = "closed"


class LandRefusal(enum.StrEnum):
    """Why a land was refused: the ``code`` of its ``Refused``, a word a
    caller can branch on (the shared ones, ``not-human``, ``busy`` and
    ``fenced``, are ``RefusalCode``'s words too)."""

    NOT_HUMAN = "not-human"  # a model action (or any origin but a person)
    NOT_OPEN = "not-open"  # landed or closed already
    DIRTY_TARGET = "dirty-target"  # the target checkout has uncommitted changes
    CONFLICT = "conflict"  # the branch does not merge cleanly
    DOCTOR_FAILED = "doctor-failed"  # the merged result fails the repository's checks
    TARGET_MOVED = "target-moved"  # the target branch moved while the doctor ran
    BUSY = "busy"  # another land into the same repository is running
    GIT_FAILED = "git-failed"  # the repository, branch or revision is not usable
    FENCED = "fenced"  # this daemon was taken over


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    id: int
    task_id: int
    repo: str
    branch: str
    base: str
    head: str
    diffstat: str
    doctor_summary: str
    state: ReviewState
    created_at: float
    updated_at: float
    target: str = ""  # the authoritative branch it lands on (the repository's checked-out branch)
    landed_revision: str = ""  # the target's revision after landing
    note: str = ""  # how it was landed or why it was closed


@request("reviews.Open", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Open(Request["Opened | Refused"]):
    """A task's change is committed on ``branch`` (``base``..``head``).
    Idempotent per task: the same task and head answer the existing review;
    a new head from the same task (it ran again) replaces the open review's
    head; a task whose review is landed or closed is refused."""

    task_id: int
    repo: str = field(metadata=limit(MAX_PATH))
    branch: str = field(metadata=limit(256))
    base: str = field(metadata=limit(MAX_REVISION))
    head: str = field(metadata=limit(MAX_REVISION))
    diffstat: str = field(default="", metadata=limit(MAX_SUMMARY))
    doctor_summary: str = field(default="", metadata=limit(MAX_SUMMARY))


@reply("reviews.Opened")
@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    review_id: int
    existing: bool  # the task had this review already (same or replaced head)


@request("reviews.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["ReviewList"]):
    """Reviews newest first; ``before`` is a cursor (a review id) for the
    next page."""

    state: ReviewState | None = None
    task_id: int | None = None
    limit: int = 100
    before: int | None = None


@reply("reviews.ReviewList")
@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewList:
    reviews: tuple[Review, ...]
    more: bool  # older reviews match too (ask again with before = the last id)


@request("reviews.Get")
@dataclass(frozen=True, slots=True, kw_only=True)
class Get(Request["Found | NotFound"]):
    review_id: int


@reply("reviews.Found")
@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    review: Review


@request("reviews.Diff")
@dataclass(frozen=True, slots=True, kw_only=True)
class Diff(Request["ReviewDiff | NotFound | Refused"]):
    """The review's change as a unified diff (``base``..``head``)."""

    review_id: int


@reply("reviews.ReviewDiff")
@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewDiff:
    review_id: int
    text: str
    truncated: bool


@request("reviews.Land")
@dataclass(frozen=True, slots=True, kw_only=True)
class Land(Request["Landed | NotFound | Refused"]):
    """Merge the review's branch into its target (fast-forward where
    possible) after the doctor passed on the merged result. Human authority
    only: the origin is stamped by whoever delivers the request."""

    review_id: int
    origin: Origin = ""


@reply("reviews.Landed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Landed:
    review: Review
    fast_forward: bool
    merged_by: str = ""
    """``Name <email>`` of the merge commit (the repository's configured
    identity, else enact's, which the review's note then says); "" for a
    fast-forward."""


@request("reviews.Close")
@dataclass(frozen=True, slots=True, kw_only=True)
class Close(Request["Closed | NotFound | Refused"]):
    """Close without landing (its branch is deleted, if this home made it).
    Human authority only. The reply is also published as an event."""

    review_id: int
    reason: str = field(default="", metadata=limit(1000))
    origin: Origin = ""


@reply("reviews.Closed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Closed:
    review: Review
