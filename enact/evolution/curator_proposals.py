"""A proposal, in stages, each a step on the curator's thread: the active
signals are read and a crash's unlinked candidates repaired, synthesis runs
off the thread (a ``ModelCall``; its answer is the next step), its
candidates are committed and only then their signals linked, curation runs
off the thread, and the proposal is recorded. One proposal runs at a time;
its asker's reply is deferred until it is recorded (or a step failed). A
model call still running when the curator stops or fails is abandoned with
its answer (``EnactActor.off_thread``), and the reply it owed fails. Each
step takes the time and yields its effects (``enact.evolution.curator_effects``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from enact.actors._batching import Deferred
from enact.evolution import curation, synthesis
from enact.evolution.candidates import Candidate
from enact.evolution.curator_effects import (
    CandidatesChanged,
    ModelCall,
    ProposalRecorded,
    Steps,
    Unanswered,
    ask_or_unanswered,
    counted,
)
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.curator_signals import SCANNER, link_signals
from enact.evolution.signals import Signal
from enact.frozen_dataclass import dataclass
from enact.messages.common import RefusalCode, Refused
from enact.messages.curator import MAX_LIST, PROPOSAL_RUNNING, Propose, Proposed

log = logging.getLogger(__name__)

TASKS, REVIEWS = "tasks", "reviews"
RECENT_TASKS = 60
"""Newest tasks read for curation's completion records."""


@dataclass(frozen=True, slots=True)
class Run:
    """A proposal under way."""

    reply: Deferred
    origin: str
    synthesised: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


class Proposals:
    def __init__(self, records: CuratorRecords, *, is_current: Callable[[], bool]) -> None:
        self._records = records
        self._is_current = is_current
        """Whether this daemon still owns the home (the fence)."""
        self._running: Run | None = None

    def propose(self, message: Propose, now: float) -> Steps[Deferred | Refused]:
        if self._running is not None:
            return Refused(reason=PROPOSAL_RUNNING, code=RefusalCode.BUSY)
        if not self._is_current():
            return Refused(reason="this daemon was taken over (fenced)", code=RefusalCode.FENCED)
        run = Run(reply=Deferred(), origin=message.origin)
        self._running = run
        try:
            signals = yield from self._active_signals(run)
            free = yield from self._repair_links(signals, now)
            if free:
                by_id = {signal.id: signal for signal in free}
                yield ModelCall(synthesis.prompt(free), lambda answer, failure, at: self._guarded(
                    run, self._store_candidates(run, by_id, answer, failure, at)))
            else:
                run.notes.append("no new signals to synthesise")
                yield from self._curate(run, now)
        except BaseException:
            self._running = None
            raise
        return run.reply

    def _active_signals(self, run: Run) -> Steps[list[Signal]]:
        from enact.messages.scanner import SignalList, Signals

        # The oldest first, as synthesis takes them: with more waiting than
        # one batch, the oldest must not wait behind newer ones for ever.
        reply = yield from ask_or_unanswered(SCANNER, Signals(state="active", limit=synthesis.MAX_SIGNALS,
                                                              oldest_first=True))
        if isinstance(reply, Unanswered):
            run.notes.append(f"the scanner did not answer ({reply.reason}); no signals read")
            return []
        return list(reply.signals) if isinstance(reply, SignalList) else []

    def _repair_links(self, signals: list[Signal], now: float) -> Steps[list[Signal]]:
        """Link signals a stored candidate already draws on (a crash came
        between the candidate's commit and the link); the rest are free."""
        repaired = synthesis.claimed(self._records.all_candidates(), signals)
        for candidate_id, signal_ids in repaired.items():
            if (yield from link_signals(candidate_id, signal_ids)):
                self._records.note(_event("linked", candidate_id, at=now,
                                          detail=f"repaired: linked {', '.join(signal_ids)}"))
        taken = {signal_id for ids in repaired.values() for signal_id in ids}
        return synthesis.pending(signal for signal in signals if signal.id not in taken)

    def _store_candidates(self, run: Run, signals: dict[str, Signal], answer: str, failure: str,
                          now: float) -> Steps[None]:
        """Commit each new candidate, then link its signals; then curate."""
        try:
            drafts = synthesis.parse(answer, signals) if not failure else []
            problem = failure
        except synthesis.SynthesisError as error:
            drafts, problem = [], str(error)
        if problem:
            run.notes.append(f"synthesis rejected: {problem}")
            self._records.note(_event("synthesis-rejected", at=now, detail=problem))
        for draft in drafts:
            if self._records.candidate(draft.id) is None:
                made = synthesis.candidate(draft, signals, now)
                self._records.put(made, _event("synthesised", made.id, at=now,
                                               detail=f"{made.draft.title} (score {made.score:.3f})"))
                yield from counted(CandidatesChanged())
            run.synthesised.append(draft.id)
            yield from link_signals(draft.id, draft.evidence_ids)
        yield from self._curate(run, now)

    def _curate(self, run: Run, now: float) -> Steps[None]:
        shown = curation.shown(self._records.all_candidates(), now)
        if not shown:
            yield from self._record(run, curation.Curation(
                recommended=None, reason="no active candidates to curate", guidance="", removals=(),
                fallback=False), shown, now)
            return
        records = yield from self._completion_records()
        yield ModelCall(curation.prompt(shown, records), lambda answer, failure, at: self._guarded(
            run, self._curated(run, shown, records, answer, failure, at)))

    def _completion_records(self) -> Steps[list[curation.CompletionRecord]]:
        from enact.messages.reviews import List as ListReviews
        from enact.messages.reviews import ReviewList, ReviewState
        from enact.messages.tasks import List as ListTasks
        from enact.messages.tasks import TaskPage

        page = yield from ask_or_unanswered(TASKS, ListTasks(limit=RECENT_TASKS))
        if isinstance(page, Unanswered):
            log.warning("curation goes without completion records: %s", page.reason)
            return []
        landed = yield from ask_or_unanswered(REVIEWS, ListReviews(state=ReviewState.LANDED, limit=MAX_LIST))
        if isinstance(landed, Unanswered):
            log.warning("curation goes without completion records: %s", landed.reason)
            return []
        ended = [task for task in page.tasks if task.state.ended] if isinstance(page, TaskPage) else []
        landed_tasks = {review.task_id for review in landed.reviews} if isinstance(landed, ReviewList) else set()
        return curation.completion_records(ended, landed_tasks)

    def _curated(self, run: Run, shown: list[Candidate], records: list[curation.CompletionRecord], answer: str,
                 failure: str, now: float) -> Steps[None]:
        try:
            if failure:
                raise curation.CurationError(failure)
            verdict = curation.parse(answer, shown, records)
        except curation.CurationError as error:
            verdict = curation.fallback(shown, str(error))
        yield from self._record(run, verdict, shown, now)

    def _guarded(self, run: Run, step: Steps[None]) -> Steps[None]:
        """A step after a model call: if it fails, the proposal ends and its asker hears why."""
        try:
            yield from step
        except BaseException as error:
            self._running = None
            run.reply.fail(error)
            raise

    def _record(self, run: Run, verdict: curation.Curation, shown: list[Candidate], now: float) -> Steps[None]:
        try:
            proposal = self._records.record_proposal(verdict, shown, now)
        finally:
            self._running = None
        yield from counted(ProposalRecorded())
        run.reply.resolve(Proposed(proposal=proposal, synthesised=tuple(run.synthesised),
                                   synthesis_note="; ".join(run.notes)))
