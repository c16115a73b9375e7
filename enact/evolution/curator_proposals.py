"""A proposal, in stages, each on the curator's thread: the active signals
are read and a crash's unlinked candidates repaired, synthesis runs off the
thread (its outcome ``Synthesised``), its candidates are committed and only
then their signals linked, curation runs off the thread (``Curated``), and
the proposal is recorded. One proposal runs at a time; its asker's reply is
deferred until it is recorded (or a step failed). A model call still running
when the curator stops or fails is abandoned with its answer
(``EnactActor.off_thread``), and the reply it owed fails."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._long_work import OffThread
from enact.cancellation import CancellationToken
from enact.config import RuntimeSettings
from enact.evolution import curation, synthesis
from enact.evolution.candidates import Candidate
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.curator_signals import SCANNER, link_signals
from enact.evolution.metrics import EvolutionMetrics
from enact.evolution.signals import Signal
from enact.messages.common import RefusalCode, Refused
from enact.messages.curator import MAX_LIST, PROPOSAL_RUNNING, Propose, Proposed
from enact.runtime import Runtime, RuntimeRequest

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


@dataclass(frozen=True, slots=True)
class Synthesised:
    run: Run
    signals: dict[str, Signal]
    answer: str
    failure: str


@dataclass(frozen=True, slots=True)
class Curated:
    run: Run
    shown: list[Candidate]
    records: list[curation.CompletionRecord]
    answer: str
    failure: str


class Proposals:
    def __init__(self, context: ActorContext, records: CuratorRecords, runtime: Runtime, *,
                 off_thread: OffThread, stored: Callable[[], None]) -> None:
        self._context = context
        self._records = records
        self._runtime = runtime
        self._off_thread = off_thread
        self._stored = stored
        """Called after a candidate was stored (the state gauge)."""
        self._running: Run | None = None

    def propose(self, message: Propose) -> Deferred | Refused:
        if self._running is not None:
            return Refused(reason=PROPOSAL_RUNNING, code=RefusalCode.BUSY)
        if not self._context.fence.is_current():
            return Refused(reason="this daemon was taken over (fenced)", code=RefusalCode.FENCED)
        run = Run(reply=Deferred(), origin=message.origin)
        self._running = run
        try:
            signals = self._active_signals(run)
            free = self._repair_links(signals)
            if free:
                by_id = {signal.id: signal for signal in free}
                self._call(synthesis.prompt(free), lambda answer, failure: self.synthesised(
                    Synthesised(run=run, signals=by_id, answer=answer, failure=failure)))
            else:
                run.notes.append("no new signals to synthesise")
                self._curate(run)
        except BaseException:
            self._running = None
            raise
        return run.reply

    def _active_signals(self, run: Run) -> list[Signal]:
        from enact.messages.scanner import SignalList, Signals

        try:
            # The oldest first, as synthesis takes them: with more waiting than
            # one batch, the oldest must not wait behind newer ones for ever.
            reply = self._context.ask(SCANNER, Signals(state="active", limit=synthesis.MAX_SIGNALS,
                                                       oldest_first=True))
        except ActorUnavailable as error:
            run.notes.append(f"the scanner did not answer ({error}); no signals read")
            return []
        return list(reply.signals) if isinstance(reply, SignalList) else []

    def _repair_links(self, signals: list[Signal]) -> list[Signal]:
        """Link signals a stored candidate already draws on (a crash came
        between the candidate's commit and the link); the rest are free."""
        repaired = synthesis.claimed(self._records.all_candidates(), signals)
        for candidate_id, signal_ids in repaired.items():
            if link_signals(self._context, candidate_id, signal_ids):
                self._records.note(_event("linked", candidate_id,
                                          detail=f"repaired: linked {', '.join(signal_ids)}"))
        taken = {signal_id for ids in repaired.values() for signal_id in ids}
        return synthesis.pending(signal for signal in signals if signal.id not in taken)

    def _call(self, prompt: str, done: Callable[[str, str], None]) -> None:
        """Run one isolated, read-only model call off the curator's thread;
        ``done(answer, failure)`` on it."""
        timeout_s = self._context.config.typed(RuntimeSettings).timeout_s

        def call(cancel: CancellationToken) -> tuple[str, str]:
            request = RuntimeRequest(session_key="", prompt=prompt, sandbox="read-only", purpose="curation",
                                     timeout_s=timeout_s, cancel=cancel)
            try:
                return self._runtime.invoke(request).text, ""
            except Exception as error:  # a model failure of any kind: the stage says so
                return "", f"the model call failed: {type(error).__name__}: {error}"

        self._off_thread(call, then=lambda outcome: done(*outcome))

    def synthesised(self, message: Synthesised) -> None:
        self._guarded(message.run, lambda: self._store_candidates(message))

    def _store_candidates(self, message: Synthesised) -> None:
        """Commit each new candidate, then link its signals; then curate."""
        run = message.run
        try:
            drafts = synthesis.parse(message.answer, message.signals) if not message.failure else []
            problem = message.failure
        except synthesis.SynthesisError as error:
            drafts, problem = [], str(error)
        if problem:
            run.notes.append(f"synthesis rejected: {problem}")
            self._records.note(_event("synthesis-rejected", detail=problem))
        now = self._context.clock.time()
        for draft in drafts:
            if self._records.candidate(draft.id) is None:
                made = synthesis.candidate(draft, message.signals, now)
                self._records.put(made, _event("synthesised", made.id,
                                               detail=f"{made.draft.title} (score {made.score:.3f})"))
                self._stored()
            run.synthesised.append(draft.id)
            link_signals(self._context, draft.id, draft.evidence_ids)
        self._curate(run)

    def _curate(self, run: Run) -> None:
        shown = curation.shown(self._records.all_candidates(), self._context.clock.time())
        if not shown:
            self._record(run, curation.Curation(recommended=None, reason="no active candidates to curate",
                                                guidance="", removals=(), fallback=False), shown)
            return
        records = self._completion_records()
        self._call(curation.prompt(shown, records), lambda answer, failure: self.curated(
            Curated(run=run, shown=shown, records=records, answer=answer, failure=failure)))

    def _completion_records(self) -> list[curation.CompletionRecord]:
        from enact.messages.reviews import List as ListReviews
        from enact.messages.reviews import ReviewList, ReviewState
        from enact.messages.tasks import List as ListTasks
        from enact.messages.tasks import TaskPage

        try:
            page = self._context.ask(TASKS, ListTasks(limit=RECENT_TASKS))
            landed = self._context.ask(REVIEWS, ListReviews(state=ReviewState.LANDED, limit=MAX_LIST))
        except ActorUnavailable as error:
            log.warning("curation goes without completion records: %s", error)
            return []
        ended = [task for task in page.tasks if task.state.ended] if isinstance(page, TaskPage) else []
        landed_tasks = {review.task_id for review in landed.reviews} if isinstance(landed, ReviewList) else set()
        return curation.completion_records(ended, landed_tasks)

    def curated(self, message: Curated) -> None:
        self._guarded(message.run, lambda: self._record(message.run, self._verdict(message), message.shown))

    @staticmethod
    def _verdict(message: Curated) -> curation.Curation:
        try:
            if message.failure:
                raise curation.CurationError(message.failure)
            return curation.parse(message.answer, message.shown, message.records)
        except curation.CurationError as error:
            return curation.fallback(message.shown, str(error))

    def _guarded(self, run: Run, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as error:
            self._running = None
            run.reply.fail(error)
            raise

    def _record(self, run: Run, verdict: curation.Curation, shown: list[Candidate]) -> None:
        try:
            proposal = self._records.record_proposal(verdict, shown, self._context.clock.time())
        finally:
            self._running = None
        self._context.metrics.of(EvolutionMetrics).proposals.inc()
        run.reply.resolve(Proposed(proposal=proposal, synthesised=tuple(run.synthesised),
                                   synthesis_note="; ".join(run.notes)))
