"""Local reviews: a task's committed branch, waiting for its owner to land
or close it.

Owns ``reviews.records`` (key: the review id, 8 bytes big-endian, so the
newest sit last) and ``reviews.tasks`` (key: the task id, same form; value:
its review id), which makes opening idempotent per task. Landing runs the
doctor, which can take minutes, so it runs on a thread of its own (``off_thread``) and
the actor stays responsive; the outcome is recorded on the actor's thread. The merge itself is ``enact.tasks.landing``.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lmdb

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred
from enact.cancellation import CancellationToken
from enact.messages.common import NotFound, RefusalCode, Refused, is_human
from enact.messages.reviews import (
    MAX_LIST,
    Close,
    Closed,
    Diff,
    Found,
    Get,
    Land,
    Landed,
    LandRefusal,
    List,
    Open,
    Opened,
    Review,
    ReviewDiff,
    ReviewList,
    ReviewState,
)
from enact.storage import AppendLog, RecordTable, decode_record
from enact.tasks import landing, task_branches
from enact.tasks.host_git import WorktreeError
from enact.tasks.metrics import TasksMetrics
from enact.tasks.settings import TasksSettings

log = logging.getLogger(__name__)

RECORDS = "reviews.records"
TASKS = "reviews.tasks"
DATABASES = (RECORDS, TASKS)
REVIEWS_DIR = "reviews"
MAX_DIFF_CHARS = 300_000
"""A diff longer than this is cut (a control frame holds at most 1 MiB)."""

_ID = struct.Struct(">Q")


def landing_dir(home: Path) -> Path:
    """Where the temporary worktrees of landings live (one per landing)."""
    return home / REVIEWS_DIR / "landing"


def doctor_log_path(home: Path, review_id: int) -> Path:
    return home / REVIEWS_DIR / str(review_id) / "land-doctor.log"


class ReviewsActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._log = self._store.log(RECORDS)
        self._records = RecordTable(self._log, Review)
        self._tasks = self._store.table(TASKS)
        self._landing: dict[int, str] = {}
        """Reviews being landed now, and their repositories."""

    def on_start(self) -> None:
        # A landing cut short by a crash left its temporary worktree; its
        # repository forgets it at the next land (``git worktree prune``).
        directory = landing_dir(self.context.home)
        if directory.is_dir():
            for leftover in directory.iterdir():
                landing.remove_scratch(leftover)

    def handle(self, message: Any) -> Any:
        match message:
            case Open():
                return self._open(message)
            case List():
                return self._list(message)
            case Get():
                review = self._get(message.review_id)
                return Found(review=review) if review else _not_found(message.review_id)
            case Diff():
                return self._diff(message)
            case Land():
                return self._land(message)
            case Close():
                return self._close(message)
        return super().handle(message)

    # -- records ----------------------------------------------------------

    def _get(self, review_id: int) -> Review | None:
        if review_id < 1:
            return None
        return self._store.read(lambda txn: self._records.get(txn, AppendLog.key(review_id)))

    def _put(self, review: Review) -> Review:
        self._store.write(lambda txn: self._records.put(txn, AppendLog.key(review.id), review))
        return review

    def _open(self, message: Open) -> Opened | Refused:
        if message.task_id < 1:
            return Refused(reason=f"task id {message.task_id} is not a task's id", code=RefusalCode.INVALID)
        task_key = _ID.pack(message.task_id)

        def write(txn: lmdb.Transaction) -> Opened | Refused:
            now = self.context.clock.time()
            known = self._tasks.get(txn, task_key)
            if known is not None:
                review = self._records.get(txn, AppendLog.key(int(known["review_id"])))
                if review is None:
                    raise RuntimeError(f"reviews.tasks names review {known['review_id']}, which is not stored")
                if review.head == message.head:
                    return Opened(review_id=review.id, existing=True)
                if review.state is not ReviewState.OPEN:
                    return Refused(reason=f"task {message.task_id}'s review {review.id} is {review.state.value}"
                                           "; it cannot take a new head", code=RefusalCode.WRONG_STATE)
                # The task ran again (after a crash) and captured anew: its
                # review shows the latest capture, never a second review.
                replaced = dataclasses.replace(review, branch=message.branch, base=message.base, head=message.head,
                                               diffstat=message.diffstat, doctor_summary=message.doctor_summary,
                                               updated_at=now)
                self._records.put(txn, AppendLog.key(review.id), replaced)
                return Opened(review_id=review.id, existing=True)
            review_id = self._log.last_cursor(txn) + 1
            review = Review(id=review_id, task_id=message.task_id, repo=message.repo, branch=message.branch,
                            base=message.base, head=message.head, diffstat=message.diffstat,
                            doctor_summary=message.doctor_summary, state=ReviewState.OPEN, created_at=now,
                            updated_at=now)
            self._records.put(txn, AppendLog.key(review_id), review)
            self._tasks.put(txn, task_key, {"review_id": review_id})
            return Opened(review_id=review_id, existing=False)

        return self._store.write(write)

    def _list(self, message: List) -> ReviewList | Refused:
        if not 1 <= message.limit <= MAX_LIST:
            return Refused(reason=f"limit must be between 1 and {MAX_LIST}", code=RefusalCode.INVALID)

        def read(txn: lmdb.Transaction) -> ReviewList:
            found: list[Review] = []
            candidates: Iterable[Review]
            if message.task_id is not None:
                known = self._tasks.get(txn, _ID.pack(message.task_id)) if message.task_id > 0 else None
                review = self._records.get(txn, AppendLog.key(int(known["review_id"]))) if known else None
                candidates = [review] if review is not None else []
            else:
                candidates = (decode_record(Review, document, database=RECORDS, key=AppendLog.key(sequence))
                              for sequence, document in self._log.iterate_backwards(txn))
            for review in candidates:
                if message.before is not None and review.id >= message.before:
                    continue
                if message.state is not None and review.state is not message.state:
                    continue
                if len(found) == message.limit:
                    return ReviewList(reviews=tuple(found), more=True)
                found.append(review)
            return ReviewList(reviews=tuple(found), more=False)

        return self._store.read(read)

    # -- reading the change -----------------------------------------------

    def _diff(self, message: Diff) -> ReviewDiff | NotFound | Refused:
        review = self._get(message.review_id)
        if review is None:
            return _not_found(message.review_id)
        try:
            text, truncated = landing.diff(Path(review.repo), review.base, review.head, max_chars=MAX_DIFF_CHARS)
        except WorktreeError as error:
            return Refused(reason=f"review {review.id}: {error}", code=LandRefusal.GIT_FAILED)
        return ReviewDiff(review_id=review.id, text=text, truncated=truncated)

    # -- landing and closing ----------------------------------------------

    def _refusal(self, review: Review | None, review_id: int, origin: str, verb: str) -> Refused | NotFound | None:
        """Why ``verb`` (land, close) may not go ahead, or None."""
        if not is_human(origin):
            return Refused(reason=f"to {verb} a review needs a human (the owner's CLI or chat), "
                                   f"not {origin or 'an unnamed origin'}", code=LandRefusal.NOT_HUMAN)
        if review is None:
            return _not_found(review_id)
        if review.state is not ReviewState.OPEN:
            return Refused(reason=f"review {review_id} is {review.state.value}", code=LandRefusal.NOT_OPEN)
        if review_id in self._landing:
            return Refused(reason=f"review {review_id} is being landed now", code=LandRefusal.NOT_OPEN)
        return None

    def _land(self, message: Land) -> Landed | NotFound | Refused | Deferred:
        reply = self._start_land(message)
        if isinstance(reply, Refused):
            self.context.metrics.of(TasksMetrics).review_lands.labels(outcome=reply.code).inc()
        return reply

    def _start_land(self, message: Land) -> Landed | NotFound | Refused | Deferred:
        review = self._get(message.review_id)
        refused = self._refusal(review, message.review_id, message.origin, "land")
        if refused is not None or review is None:
            return refused or _not_found(message.review_id)
        if not self.context.fence.is_current():
            return Refused(reason="this daemon was taken over (fenced)", code=LandRefusal.FENCED)
        if review.repo in self._landing.values():
            # One land per repository at a time: the second would only find
            # the target moved under it once the first is done.
            return Refused(reason=f"another review is being landed into {review.repo}; land again after it",
                            code=LandRefusal.BUSY)
        self._landing[review.id] = review.repo
        reply = Deferred()
        plan = landing.LandPlan(repo=Path(review.repo), head=review.head,
                                message=landing.merge_message(review.id, review.task_id, review.branch))
        self.off_thread(lambda cancel: self._run_land(review, plan, cancel),
                        then=lambda outcome: self._land_finished(review.id, outcome, reply, message.origin),
                        name=f"land-{review.id}")
        return reply

    def _run_land(self, review: Review, plan: landing.LandPlan, cancel: CancellationToken) -> landing.LandOutcome:
        """Off the actor's thread: it records nothing, the outcome is recorded by ``_land_finished``."""
        home = self.context.home
        scratch = landing_dir(home) / f"review-{review.id}-{uuid.uuid4().hex[:8]}"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        doctor = _doctor(self.context, review, doctor_log_path(home, review.id), cancel)
        try:
            return landing.land(plan, scratch=scratch, doctor=doctor, current=self.context.fence.is_current)
        except Exception as error:  # a defect, or the doctor cancelled (a fence, a stop)
            log.exception("landing review %d failed", review.id)
            return landing.refused(LandRefusal.GIT_FAILED, f"landing failed: {type(error).__name__}: {error}")

    def _land_finished(self, review_id: int, outcome: landing.LandOutcome, reply: Deferred, origin: str) -> None:
        self._landing.pop(review_id, None)
        review = self._get(review_id)
        if review is None:  # cannot happen: reviews are never deleted
            reply.fail(RuntimeError(f"review {review_id} vanished while it was landed"))
            return
        if not outcome.landed or outcome.refusal is not None:
            refusal = outcome.refusal or LandRefusal.GIT_FAILED
            self.context.metrics.of(TasksMetrics).review_lands.labels(outcome=refusal.value).inc()
            reply.resolve(Refused(reason=outcome.reason, code=refusal))
            return
        self.context.metrics.of(TasksMetrics).review_lands.labels(outcome="landed").inc()
        how = "fast-forward" if outcome.fast_forward else f"merge commit by {outcome.merged_by}"
        why = f"; {outcome.identity_note}" if outcome.identity_note else ""
        landed = self._put(dataclasses.replace(
            review, state=ReviewState.LANDED, target=outcome.target, landed_revision=outcome.revision,
            note=f"landed on {outcome.target} at {outcome.revision[:12]} by {origin} ({how}{why}); "
                 f"doctor: {outcome.doctor_summary}",
            updated_at=self.context.clock.time()))
        self._drop_branch(landed)
        event = Landed(review=landed, fast_forward=outcome.fast_forward, merged_by=outcome.merged_by)
        # Also an event: the curator adopts the candidate whose task this was.
        self.context.publish(event)
        reply.resolve(event)

    def _close(self, message: Close) -> Closed | NotFound | Refused:
        review = self._get(message.review_id)
        refused = self._refusal(review, message.review_id, message.origin, "close")
        if refused is not None or review is None:
            return refused or _not_found(message.review_id)
        who = message.origin  # the owner's way in (human-cli, human-console, chat:<channel>), for the record
        note = f"closed by {who}: {message.reason}" if message.reason else f"closed by {who} without landing"
        closed = self._put(dataclasses.replace(review, state=ReviewState.CLOSED, note=note,
                                               updated_at=self.context.clock.time()))
        self._drop_branch(closed)
        event = Closed(review=closed)
        self.context.publish(event)  # also an event: a review's page shows it closed without a reload
        return event

    def _drop_branch(self, review: Review) -> None:
        """The task's branch is done with once its review is landed (the
        target has the commit) or closed (the owner turned it down); only a
        branch this home made is deleted."""
        try:
            task_branches.release(self.context.home, review.task_id, branch=review.branch)
        except WorktreeError as error:
            log.warning("review %d: branch %s stays: %s", review.id, review.branch, error)


def _not_found(review_id: int) -> NotFound:
    return NotFound(kind="review", id=str(review_id))


def _doctor(context: ActorContext, review: Review, log_path: Path, cancel: CancellationToken) -> landing.Doctor:
    """The repository's doctor on a merged result, as the target's revision
    has it (``enact.tasks.validation``: its ``.enact.toml``, and every test
    the target runs must run on the result, unless the task's owner allowed
    fewer), confined like a task's (``tasks.confinement``): the merged code
    is the model's too. Cancelled with the daemon's long calls when it is
    fenced."""
    from enact.messages.tasks import Found, Get
    from enact.tasks.confine import ConfinementUnavailable, confinement
    from enact.tasks.doctor import DoctorResult
    from enact.tasks.repo_config import RepoConfigError
    from enact.tasks.validation import Validation

    settings = context.config.typed(TasksSettings)

    def check(worktree: Path, target: str) -> landing.DoctorVerdict:
        try:
            task = context.ask("tasks", Get(task_id=review.task_id))
        except ActorUnavailable:
            task = None
        fewer = isinstance(task, Found) and task.task.allow_fewer_tests
        try:
            validation = Validation.against(Path(review.repo), target, home=context.home, settings=settings,
                                            allow_fewer_tests=fewer)
        except RepoConfigError as error:
            return DoctorResult(passed=False, summary=str(error), head_tail=str(error))
        try:
            with confinement(settings.confinement, home=context.home, worktree=worktree,
                             passthrough=settings.env_passthrough) as confine:
                return validation.check(worktree, log_path=log_path, cancel=cancel.child(),
                                        confine=confine)
        except ConfinementUnavailable as refused:  # required, and not to be had: the checks did not run
            return DoctorResult(passed=False, summary=str(refused), head_tail=str(refused))

    return check
