"""Adoption: an approved candidate follows its task to a review, and the
review's landing adopts it.

The curator is told ``tasks.TaskChanged`` (the task opened its review) and
``reviews.Landed``. A retry of the approved task (``queue.retry``: a new
task with ``parent``) is the same work: a task is matched by the root of its
parent chain, asked of the task queue (which never asks the curator). What
changed while the curator was not running is caught up at its start
(``reconcile``), by asking the task queue and the reviews.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.evolution import approval
from enact.evolution.candidates import Candidate, CandidateState
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.curator_signals import set_signals
from enact.evolution.signals import SignalState
from enact.messages.curator import AuditEvent
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged

log = logging.getLogger(__name__)

TASKS, REVIEWS = "tasks", "reviews"
_MAX_PARENTS = 10_000


class Adoption:
    def __init__(self, context: ActorContext, records: CuratorRecords, *, stored: Callable[[], None]) -> None:
        self._context = context
        self._records = records
        self._stored = stored
        """Called after a candidate changed (the state gauge)."""
        self._parents: dict[int, int | None] = {}
        """Each task's parent, as the task queue said (a parent never changes)."""

    def _parent_or_none(self, task_id: int) -> int | None:
        try:
            return self._parent_of(task_id)
        except ActorUnavailable as error:
            log.warning("task %d not matched to a candidate: %s", task_id, error)
            return None

    def _put(self, candidate: Candidate, *events: AuditEvent) -> None:
        self._records.put(candidate, *events)
        self._stored()

    def _by_task(self, task_id: int) -> Candidate | None:
        return next((c for c in self._records.all_candidates() if c.task_id == task_id), None)

    def _parent_of(self, task_id: int) -> int | None:
        from enact.messages.tasks import Found, Get

        if task_id not in self._parents:
            reply = self._context.ask(TASKS, Get(task_id=task_id))
            if len(self._parents) >= _MAX_PARENTS:
                self._parents.clear()
            self._parents[task_id] = reply.task.parent if isinstance(reply, Found) else None
        return self._parents[task_id]

    def _root(self, task_id: int, parent: int | None) -> int | None:
        """The approved task ``task_id`` retries (itself when no retry), or
        None when the task queue does not answer."""
        if parent is None:
            return task_id
        self._parents[task_id] = parent
        try:
            return approval.root_task(task_id, self._parent_of)
        except ActorUnavailable as error:
            log.warning("task %d not matched to a candidate: %s", task_id, error)
            return None

    def task_changed(self, message: TaskChanged) -> None:
        task = message.task
        if task.parent is None and not task.idempotency_key.startswith(approval.KEY_PREFIX):
            return
        root = self._root(task.id, task.parent)
        found = self._by_task(root) if root is not None else None
        if found is None or found.state is not CandidateState.APPROVED:
            return
        if task.review_id and task.review_id != found.review_id:
            self._put(dataclasses.replace(found, review_id=task.review_id, updated_at=self._context.clock.time()),
                      _event("review-recorded", found.id, detail=f"task {task.id} opened review {task.review_id}"))
        elif task.state.ended and not task.review_id:
            self._records.note(_event("task-ended", found.id,
                                      detail=f"task {task.id} {task.state.value}: {task.summary}"))

    def landed(self, message: Landed) -> None:
        review = message.review
        found = self._by_task(review.task_id)
        if found is None:
            root = self._root(review.task_id, self._parent_or_none(review.task_id))
            found = self._by_task(root) if root is not None else None
        if found is None or found.state is not CandidateState.APPROVED:
            return
        self._adopt(found, str(review.id))

    def _adopt(self, found: Candidate, review_id: str) -> None:
        adopted = dataclasses.replace(found, state=CandidateState.ADOPTED, review_id=review_id,
                                      updated_at=self._context.clock.time())
        self._put(adopted, _event("adopted", found.id, detail=f"review {review_id} landed"))
        set_signals(self._context, adopted, SignalState.RESOLVED)

    def reconcile(self) -> None:
        """An approved candidate whose task or review moved on while this
        actor was not running (its events were not told to it)."""
        from enact.messages.reviews import Found as ReviewFound
        from enact.messages.reviews import Get as GetReview
        from enact.messages.reviews import ReviewState
        from enact.messages.tasks import Found, Get

        for found in self._records.all_candidates():
            if found.state is not CandidateState.APPROVED or found.task_id is None:
                continue
            try:
                task = self._context.ask(TASKS, Get(task_id=found.task_id))
                review_id = task.task.review_id if isinstance(task, Found) else found.review_id
                review = self._context.ask(REVIEWS, GetReview(review_id=int(review_id))) \
                    if review_id.isdigit() else None
            except ActorUnavailable as error:
                log.warning("approved candidates not reconciled: %s", error)
                return
            if isinstance(review, ReviewFound) and review.review.state is ReviewState.LANDED:
                self._adopt(found, review_id)
            elif review_id and review_id != found.review_id:
                self._put(dataclasses.replace(found, review_id=review_id, updated_at=self._context.clock.time()),
                          _event("review-recorded", found.id, detail=f"review {review_id} (reconciled)"))
        self._reconcile_retries()

    def _reconcile_retries(self) -> None:
        """A landed review of a retry of an approved task adopts its candidate."""
        from enact.messages.curator import MAX_LIST
        from enact.messages.reviews import List as ListReviews
        from enact.messages.reviews import ReviewList, ReviewState

        approved = {c.task_id: c for c in self._records.all_candidates()
                    if c.state is CandidateState.APPROVED and c.task_id is not None}
        if not approved:
            return
        try:
            landed = self._context.ask(REVIEWS, ListReviews(state=ReviewState.LANDED, limit=MAX_LIST))
            reviews = landed.reviews if isinstance(landed, ReviewList) else ()
            for review in reviews:
                parent = self._parent_of(review.task_id)
                if parent is None:
                    continue
                found = approved.pop(approval.root_task(review.task_id, self._parent_of), None)
                if found is not None:
                    self._adopt(found, str(review.id))
        except ActorUnavailable as error:
            log.warning("retries of approved candidates not reconciled: %s", error)
