"""Adoption: an approved candidate follows its task to a review, and the
review's landing adopts it.

The curator is told ``tasks.TaskChanged`` (the task opened its review) and
``reviews.Landed``. A retry of the approved task (``queue.retry``: a new
task with ``parent``) is the same work: a task is matched by the root of its
parent chain, asked of the task queue (which never asks the curator). What
changed while the curator was not running is caught up at its start
(``reconcile``), by asking the task queue and the reviews. Each is a step
that takes the time and yields its effects (``enact.evolution.curator_effects``).
"""

from __future__ import annotations

import dataclasses
import logging

from enact.evolution import approval
from enact.evolution.candidates import LINEAGE, Candidate, CandidateState
from enact.evolution.curator_effects import CandidatesChanged, Steps, Unanswered, ask_or_unanswered, counted, tell
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
MAX_RETRY_DEPTH = 50
"""Retries of retries followed at most, so a broken parent chain cannot loop."""


def _tell_lineage(adopted: Candidate) -> Steps[None]:
    """A parent's change taken in: its lineage entry is adopted (a lineage
    inbox not running catches up at its start)."""
    from enact.messages.lineage import ChangeAdopted

    unanswered = yield from tell("lineage", ChangeAdopted(candidate_id=adopted.id,
                                                          entry_ids=adopted.draft.evidence_ids))
    if unanswered is not None:
        log.warning("lineage entry of %s not marked adopted now: %s", adopted.id, unanswered.reason)


class Adoption:
    def __init__(self, records: CuratorRecords) -> None:
        self._records = records
        self._parents: dict[int, int | None] = {}
        """Each task's parent, as the task queue said (a parent never changes)."""

    def _put(self, candidate: Candidate, *events: AuditEvent) -> Steps[None]:
        self._records.put(candidate, *events)
        yield from counted(CandidatesChanged())

    def _by_task(self, task_id: int) -> Candidate | None:
        return next((c for c in self._records.all_candidates() if c.task_id == task_id), None)

    def _parent_of(self, task_id: int) -> Steps[int | Unanswered | None]:
        from enact.messages.tasks import Found, Get

        if task_id not in self._parents:
            reply = yield from ask_or_unanswered(TASKS, Get(task_id=task_id))
            if isinstance(reply, Unanswered):
                return reply
            if len(self._parents) >= _MAX_PARENTS:
                self._parents.clear()
            self._parents[task_id] = reply.task.parent if isinstance(reply, Found) else None
        return self._parents[task_id]

    def _root_task(self, task_id: int) -> Steps[int | Unanswered]:
        """The task a retry chain starts from: the approved task a candidate
        names (a task with no parent, or one the task queue does not know)."""
        current = task_id
        for _ in range(MAX_RETRY_DEPTH):
            parent = yield from self._parent_of(current)
            if isinstance(parent, Unanswered):
                return parent
            if parent is None:
                return current
            current = parent
        return current

    def _root(self, task_id: int, parent: int | Unanswered | None) -> Steps[int | None]:
        """The approved task ``task_id`` retries (itself when no retry), or
        None when the task queue does not answer."""
        if parent is None:
            return task_id
        root = parent
        if not isinstance(parent, Unanswered):
            self._parents[task_id] = parent
            root = yield from self._root_task(task_id)
        if isinstance(root, Unanswered):
            log.warning("task %d not matched to a candidate: %s", task_id, root.reason)
            return None
        return root

    def task_changed(self, message: TaskChanged, now: float) -> Steps[None]:
        task = message.task
        if task.parent is None and not task.idempotency_key.startswith(approval.KEY_PREFIX):
            return
        root = yield from self._root(task.id, task.parent)
        found = self._by_task(root) if root is not None else None
        if found is None or found.state is not CandidateState.APPROVED:
            return
        if task.review_id and task.review_id != found.review_id:
            yield from self._put(dataclasses.replace(found, review_id=task.review_id, updated_at=now),
                                 _event("review-recorded", found.id, at=now,
                                        detail=f"task {task.id} opened review {task.review_id}"))
        elif task.state.ended and not task.review_id:
            self._records.note(_event("task-ended", found.id, at=now,
                                      detail=f"task {task.id} {task.state.value}: {task.summary}"))

    def landed(self, message: Landed, now: float) -> Steps[None]:
        review = message.review
        found = self._by_task(review.task_id)
        if found is None:
            parent = yield from self._parent_of(review.task_id)
            root = yield from self._root(review.task_id, parent)
            found = self._by_task(root) if root is not None else None
        if found is None or found.state is not CandidateState.APPROVED:
            return
        yield from self._adopt(found, str(review.id), now)

    def _adopt(self, found: Candidate, review_id: str, now: float) -> Steps[None]:
        adopted = dataclasses.replace(found, state=CandidateState.ADOPTED, review_id=review_id, updated_at=now)
        yield from self._put(adopted, _event("adopted", found.id, at=now, detail=f"review {review_id} landed"))
        yield from set_signals(adopted, SignalState.RESOLVED)
        if adopted.draft.source == LINEAGE:
            yield from _tell_lineage(adopted)

    def reconcile(self, now: float) -> Steps[None]:
        """An approved candidate whose task or review moved on while this
        actor was not running (its events were not told to it)."""
        from enact.messages.reviews import Found as ReviewFound
        from enact.messages.reviews import Get as GetReview
        from enact.messages.reviews import ReviewState
        from enact.messages.tasks import Found, Get

        for found in self._records.all_candidates():
            if found.state is not CandidateState.APPROVED or found.task_id is None:
                continue
            task = yield from ask_or_unanswered(TASKS, Get(task_id=found.task_id))
            if isinstance(task, Unanswered):
                log.warning("approved candidates not reconciled: %s", task.reason)
                return
            review_id = task.task.review_id if isinstance(task, Found) else found.review_id
            review = (yield from ask_or_unanswered(REVIEWS, GetReview(review_id=int(review_id)))) \
                if review_id.isdigit() else None
            if isinstance(review, Unanswered):
                log.warning("approved candidates not reconciled: %s", review.reason)
                return
            if isinstance(review, ReviewFound) and review.review.state is ReviewState.LANDED:
                yield from self._adopt(found, review_id, now)
            elif review_id and review_id != found.review_id:
                yield from self._put(dataclasses.replace(found, review_id=review_id, updated_at=now),
                                     _event("review-recorded", found.id, at=now,
                                            detail=f"review {review_id} (reconciled)"))
        yield from self._reconcile_retries(now)

    def _reconcile_retries(self, now: float) -> Steps[None]:
        """A landed review of a retry of an approved task adopts its candidate."""
        from enact.messages.curator import MAX_LIST
        from enact.messages.reviews import List as ListReviews
        from enact.messages.reviews import ReviewList, ReviewState

        approved = {c.task_id: c for c in self._records.all_candidates()
                    if c.state is CandidateState.APPROVED and c.task_id is not None}
        if not approved:
            return
        landed = yield from ask_or_unanswered(REVIEWS, ListReviews(state=ReviewState.LANDED, limit=MAX_LIST))
        if isinstance(landed, Unanswered):
            log.warning("retries of approved candidates not reconciled: %s", landed.reason)
            return
        for review in landed.reviews if isinstance(landed, ReviewList) else ():
            parent = yield from self._parent_of(review.task_id)
            if parent is None:
                continue
            root = parent if isinstance(parent, Unanswered) else (yield from self._root_task(review.task_id))
            if isinstance(root, Unanswered):
                log.warning("retries of approved candidates not reconciled: %s", root.reason)
                return
            found = approved.pop(root, None)
            if found is not None:
                yield from self._adopt(found, str(review.id), now)
