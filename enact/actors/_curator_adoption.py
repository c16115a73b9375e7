"""Adoption: an approved candidate follows its task to a review, and the
review's landing adopts it.

The curator is told ``tasks.TaskChanged`` (the task opened its review) and
``reviews.Landed``; as a subscriber it never asks the publisher back. What
changed while the curator was not running is caught up at its start
(``reconcile``), by asking the task queue and the reviews.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.evolution import approval
from enact.evolution.candidates import Candidate, CandidateState
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.signals import SignalState
from enact.messages.curator import AuditEvent
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged

log = logging.getLogger(__name__)

SCANNER, TASKS, REVIEWS = "scanner", "tasks", "reviews"


def set_signals(context: ActorContext, candidate: Candidate, state: SignalState) -> None:
    """Tell the scanner the candidate's signals are ``state`` now (resolved, dismissed)."""
    from enact.messages.scanner import SetSignalState

    if candidate.evidence_ids:
        try:
            context.tell(SCANNER, SetSignalState(signal_ids=candidate.evidence_ids, state=state))
        except ActorUnavailable as error:
            log.warning("signals of %s %s not marked %s: %s", candidate.state.value, candidate.id, state, error)


class Adoption:
    def __init__(self, context: ActorContext, records: CuratorRecords, *, stored: Callable[[], None]) -> None:
        self._context = context
        self._records = records
        self._stored = stored
        """Called after a candidate changed (the state gauge)."""

    def _put(self, candidate: Candidate, *events: AuditEvent) -> None:
        self._records.put(candidate, *events)
        self._stored()

    def _by_task(self, task_id: int) -> Candidate | None:
        return next((c for c in self._records.all_candidates() if c.task_id == task_id), None)

    def task_changed(self, message: TaskChanged) -> None:
        task = message.task
        if not task.idempotency_key.startswith(approval.KEY_PREFIX):
            return
        found = self._by_task(task.id)
        if found is None or found.state is not CandidateState.APPROVED:
            return
        if task.review_id and task.review_id != found.review_id:
            self._put(dataclasses.replace(found, review_id=task.review_id, updated_at=time.time()),
                      _event("review-recorded", found.id, detail=f"task {task.id} opened review {task.review_id}"))
        elif task.state.ended and not task.review_id:
            self._records.note(_event("task-ended", found.id,
                                      detail=f"task {task.id} {task.state.value}: {task.summary}"))

    def landed(self, message: Landed) -> None:
        review = message.review
        found = self._by_task(review.task_id)
        if found is None or found.state is not CandidateState.APPROVED:
            return
        self._adopt(found, str(review.id))

    def _adopt(self, found: Candidate, review_id: str) -> None:
        adopted = dataclasses.replace(found, state=CandidateState.ADOPTED, review_id=review_id,
                                      updated_at=time.time())
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
                self._put(dataclasses.replace(found, review_id=review_id, updated_at=time.time()),
                          _event("review-recorded", found.id, detail=f"review {review_id} (reconciled)"))
