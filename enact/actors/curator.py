"""The Curator: improvement candidates from evidence, proposals, and a
human's approval into an ordinary task.

Owns ``evolution.candidates`` (key: the candidate id), ``evolution.proposals``
and ``evolution.audit`` (append logs) and ``evolution.settings`` (the evolve
mode and schedule state, written by ``enact.actors._evolve_schedule``). The
rules are plain modules in ``enact.evolution``; this actor stores, asks the
scanner, the task queue and the reviews, and runs its model calls on a
thread of its own so that it stays responsive while a model thinks.

A proposal runs in stages, each a message to this actor: the signals are
read and a crash's unlinked candidates repaired, synthesis runs on a thread
(``_Synthesised``), its candidates are committed and only then their signals
linked, curation runs on a thread (``_Curated``), and the proposal is
recorded. One proposal runs at a time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred
from enact.actors._curator_adoption import Adoption, set_signals
from enact.actors._evolve_brainstorm import BrainstormAnswered, Brainstorms
from enact.actors._evolve_schedule import EvolveModes
from enact.evolution import approval, curation, ranking, synthesis
from enact.evolution.candidates import Candidate, CandidateState
from enact.evolution.curator_records import CANDIDATES, DATABASES, CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.signals import Signal, SignalState
from enact.messages.common import Rejected, is_human
from enact.messages.curator import (
    MAX_LIST,
    PROPOSAL_RUNNING,
    Approve,
    Approved,
    AuditEvent,
    Brainstorm,
    CandidateList,
    Candidates,
    CandidateShown,
    EvolveClockChanged,
    EvolveHistory,
    EvolveRunFailed,
    GetMode,
    History,
    Propose,
    Proposed,
    RemovalSuggestion,
    Remove,
    Removed,
    SetMode,
    Show,
    SignalView,
    UnknownCandidate,
)
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged
from enact.runtime import Runtime, RuntimeRequest

log = logging.getLogger(__name__)

SCANNER, TASKS, REVIEWS = "scanner", "tasks", "reviews"
RECENT_TASKS = 60
"""Newest tasks read for curation's completion records."""


@dataclass(frozen=True, slots=True)
class _Run:
    """A proposal under way."""

    reply: Deferred
    origin: str
    synthesised: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Synthesised:
    run: _Run
    signals: dict[str, Signal]
    answer: str
    failure: str


@dataclass(frozen=True, slots=True)
class _Curated:
    run: _Run
    shown: list[Candidate]
    records: list[curation.CompletionRecord]
    answer: str
    failure: str


class _Reconcile:
    """Catch up with task and review changes published while this actor was down."""


class CuratorActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self.records = CuratorRecords(context.own_store())
        # What the evolve modes and brainstorming (enact.actors._evolve_*) use.
        self._store, self._settings = self.records.store, self.records.settings
        self._candidates = self.records.candidates
        self._runtime = runtime
        self._adoption = Adoption(context, self.records, stored=self._count_states)
        self._running: _Run | None = None
        self._modes = EvolveModes(self._store, self._settings, context.config, audit=self.records.append_event)
        self._brainstorms = Brainstorms(context, settings=self._settings, candidates=self._candidates,
                                        audit=self.records.append_event, runtime=runtime,
                                        stored=self._count_states)

    def on_start(self) -> None:
        self._count_states()
        if self.context.fence.is_current():
            self.records.index_audit()
        self.actor_ref.tell(_Reconcile())  # after start: the actors it asks are running by then

    def handle(self, message: Any) -> Any:
        match message:
            case Propose():
                return self._propose(message)
            case _Synthesised():
                return self._synthesised(message)
            case _Curated():
                return self._curated(message)
            case Candidates():
                return self._list(message)
            case Show():
                return self._show(message)
            case Approve():
                return self._approve(message)
            case Remove():
                return self._remove(message)
            case History():
                return self._history(message)
            case TaskChanged():
                return self._adoption.task_changed(message)
            case Landed():
                return self._adoption.landed(message)
            case _Reconcile():
                return self._adoption.reconcile()
            # Evolve modes and brainstorming (enact.actors._evolve_schedule, _evolve_brainstorm).
            case SetMode():
                return self._modes.set_mode(message)
            case GetMode():
                return self._modes.shown()
            case EvolveClockChanged():
                return self._modes.clock_changed(message)
            case EvolveRunFailed():
                return self._modes.run_failed(message)
            case Brainstorm():
                return self._brainstorms.start(message)
            case BrainstormAnswered():
                return self._brainstorms.answered(message)
        return super().handle(message)

    # -- records ----------------------------------------------------------

    def all_candidates(self) -> list[Candidate]:
        return self.records.all_candidates()

    def candidate(self, candidate_id: str) -> Candidate | None:
        return self.records.candidate(candidate_id)

    def _put(self, candidate: Candidate, *events: AuditEvent) -> Candidate:
        self.records.put(candidate, *events)
        self._count_states()
        return candidate

    def _count_states(self) -> None:
        for state, count in self.records.state_counts().items():
            self.context.metrics.evolution_candidates.labels(state=state.value).set(count)

    # -- proposing ----------------------------------------------------------

    def _propose(self, message: Propose) -> Deferred | Rejected:
        if self._running is not None:
            return Rejected(reason=PROPOSAL_RUNNING)
        if not self.context.fence.is_current():
            return Rejected(reason="this daemon was taken over (fenced)")
        run = _Run(reply=Deferred(), origin=message.origin)
        self._running = run
        try:
            signals = self._active_signals(run)
            free = self._repair_links(signals)
            if free:
                by_id = {signal.id: signal for signal in free}
                self._call(synthesis.prompt(free),
                           lambda answer, failure: _Synthesised(run=run, signals=by_id, answer=answer,
                                                                failure=failure))
            else:
                run.notes.append("no new signals to synthesise")
                self._curate(run)
        except BaseException:
            self._running = None
            raise
        return run.reply

    def _active_signals(self, run: _Run) -> list[Signal]:
        from enact.messages.scanner import SignalList, Signals

        try:
            # The oldest first, as synthesis takes them: with more waiting than
            # one batch, the oldest must not wait behind newer ones for ever.
            reply = self.context.ask(SCANNER, Signals(state="active", limit=synthesis.MAX_SIGNALS, oldest_first=True))
        except ActorUnavailable as error:
            run.notes.append(f"the scanner did not answer ({error}); no signals read")
            return []
        return list(reply.signals) if isinstance(reply, SignalList) else []

    def _repair_links(self, signals: list[Signal]) -> list[Signal]:
        """Link signals a stored candidate already draws on (a crash came
        between the candidate's commit and the link); the rest are free."""
        repaired = synthesis.claimed(self.all_candidates(), signals)
        for candidate_id, signal_ids in repaired.items():
            if self._link(candidate_id, signal_ids):
                self.records.note(_event("linked", candidate_id, detail=f"repaired: linked {', '.join(signal_ids)}"))
        taken = {signal_id for ids in repaired.values() for signal_id in ids}
        return synthesis.pending(signal for signal in signals if signal.id not in taken)

    def _link(self, candidate_id: str, signal_ids: tuple[str, ...]) -> bool:
        from enact.messages.scanner import LinkSignals

        try:
            self.context.ask(SCANNER, LinkSignals(signal_ids=signal_ids, candidate_id=candidate_id))
        except ActorUnavailable as error:
            log.warning("signals %s stay unlinked from %s: %s (repaired on the next proposal)",
                        ", ".join(signal_ids), candidate_id, error)
            return False
        return True

    def _call(self, prompt: str, done: Callable[[str, str], object]) -> None:
        """Run one isolated, read-only model call on a thread; tell this
        actor ``done(answer, failure)``."""
        request = RuntimeRequest(session_key="", prompt=prompt, sandbox="read-only", purpose="curation",
                                 timeout_s=float(self.context.config["runtime.timeout_s"]),
                                 cancel=self.context.fence.token.child())

        def call() -> None:
            try:
                answer, failure = self._runtime.invoke(request).text, ""
            except Exception as error:  # a model failure of any kind: the stage says so
                answer, failure = "", f"the model call failed: {type(error).__name__}: {error}"
            self.context.tell(self.context.name, done(answer, failure))

        threading.Thread(target=call, name="enact-curator-call", daemon=True).start()

    def _synthesised(self, message: _Synthesised) -> None:
        self._guarded(message.run, lambda: self._store_candidates(message))

    def _store_candidates(self, message: _Synthesised) -> None:
        """Commit each new candidate, then link its signals; then curate."""
        run = message.run
        try:
            drafts = synthesis.parse(message.answer, message.signals) if not message.failure else []
            problem = message.failure
        except synthesis.SynthesisError as error:
            drafts, problem = [], str(error)
        if problem:
            run.notes.append(f"synthesis rejected: {problem}")
            self.records.note(_event("synthesis-rejected", detail=problem))
        now = time.time()
        for draft in drafts:
            known = self.candidate(draft.id)
            if known is None:
                made = synthesis.candidate(draft, message.signals, now)
                self._put(made, _event("synthesised", made.id, detail=f"{made.title} (score {made.score:.3f})"))
            run.synthesised.append(draft.id)
            self._link(draft.id, draft.evidence_ids)
        self._curate(run)

    def _curate(self, run: _Run) -> None:
        shown = curation.shown(self.all_candidates(), time.time())
        if not shown:
            self._record(run, curation.Curation(recommended=None, reason="no active candidates to curate",
                                                guidance="", removals=(), fallback=False), shown)
            return
        records = self._completion_records()
        self._call(curation.prompt(shown, records),
                   lambda answer, failure: _Curated(run=run, shown=shown, records=records, answer=answer,
                                                    failure=failure))

    def _completion_records(self) -> list[curation.CompletionRecord]:
        from enact.messages.reviews import List as ListReviews
        from enact.messages.reviews import ReviewList, ReviewState
        from enact.messages.tasks import List as ListTasks
        from enact.messages.tasks import TaskPage

        try:
            page = self.context.ask(TASKS, ListTasks(limit=RECENT_TASKS))
            landed = self.context.ask(REVIEWS, ListReviews(state=ReviewState.LANDED, limit=MAX_LIST))
        except ActorUnavailable as error:
            log.warning("curation goes without completion records: %s", error)
            return []
        ended = [task for task in page.tasks if task.state.ended] if isinstance(page, TaskPage) else []
        landed_tasks = {review.task_id for review in landed.reviews} if isinstance(landed, ReviewList) else set()
        return curation.completion_records(ended, landed_tasks)

    def _curated(self, message: _Curated) -> None:
        self._guarded(message.run, lambda: self._record(message.run, self._verdict(message), message.shown))

    @staticmethod
    def _verdict(message: _Curated) -> curation.Curation:
        try:
            if message.failure:
                raise curation.CurationError(message.failure)
            return curation.parse(message.answer, message.shown, message.records)
        except curation.CurationError as error:
            return curation.fallback(message.shown, str(error))

    def _guarded(self, run: _Run, step: Callable[[], None]) -> None:
        if run is not self._running:
            # A model call of a run before this actor restarted: the run is
            # gone (another may be under way); its asker hears why.
            log.warning("a model answer for a proposal made before the curator restarted is ignored")
            if not run.reply.done:
                run.reply.fail(RuntimeError("the curator restarted during this proposal; propose again"))
            return
        try:
            step()
        except BaseException as error:
            self._running = None
            run.reply.fail(error)
            raise

    def _record(self, run: _Run, verdict: curation.Curation, shown: list[Candidate]) -> None:
        try:
            proposal = self.records.record_proposal(verdict, shown, time.time())
        finally:
            self._running = None
        self.context.metrics.evolution_proposals.inc()
        run.reply.resolve(Proposed(proposal=proposal, synthesised=tuple(run.synthesised),
                                   synthesis_note="; ".join(run.notes)))

    # -- reading ------------------------------------------------------------

    def _list(self, message: Candidates) -> CandidateList | Rejected:
        if not 1 <= message.limit <= MAX_LIST:
            return Rejected(reason=f"limit must be between 1 and {MAX_LIST}")
        if message.state and message.state not in set(CandidateState):
            return Rejected(reason=f"unknown state {message.state!r}; one of "
                                   + ", ".join(state.value for state in CandidateState))
        chosen = [c for c in self.all_candidates() if not message.state or c.state.value == message.state]
        return CandidateList(candidates=tuple(ranking.diverse(ranking.rescored(chosen, time.time()), message.limit)))

    def _show(self, message: Show) -> CandidateShown | UnknownCandidate:
        found = self.candidate(message.candidate_id)
        if found is None:
            return UnknownCandidate(candidate_id=message.candidate_id)
        signals, note = self._signals_of(found)
        views = tuple(SignalView(id=s.id, source=s.source, observation=s.observation, confidence=s.confidence,
                                 explicit=s.explicit, evidence_refs=s.evidence_refs, state=str(s.state))
                      for s in signals)
        audit = tuple(self.records.candidate_events(found.id))
        return CandidateShown(candidate=found, signals=views, audit=audit, signals_note=note)

    def _signals_of(self, candidate: Candidate) -> tuple[list[Signal], str]:
        if not candidate.evidence_ids:
            return [], ""
        from enact.messages.scanner import SignalList, Signals

        try:
            reply = self.context.ask(SCANNER, Signals(ids=candidate.evidence_ids))
        except ActorUnavailable as error:
            return [], f"the scanner did not answer: {error}"
        return (list(reply.signals) if isinstance(reply, SignalList) else []), ""

    def _history(self, message: History) -> EvolveHistory | Rejected:
        if not 1 <= message.limit <= MAX_LIST:
            return Rejected(reason=f"limit must be between 1 and {MAX_LIST}")
        return EvolveHistory(events=tuple(self.records.events(message.limit)),
                             proposals=tuple(self.records.newest_proposals(10)))

    # -- the owner's decisions ----------------------------------------------

    def _approve(self, message: Approve) -> Approved | UnknownCandidate | Rejected:
        from enact.messages.tasks import Submit, Submitted

        if not is_human(message.origin):
            return Rejected(reason=f"approving a candidate needs a human (the owner's CLI or chat), not "
                                   f"{message.origin or 'an unnamed origin'}")
        found = self.candidate(message.candidate_id)
        if found is None:
            return UnknownCandidate(candidate_id=message.candidate_id)
        if found.state is not CandidateState.ACTIVE and found.task_id is not None:
            return Approved(candidate_id=found.id, task_id=found.task_id, existing=True)
        if found.state is not CandidateState.ACTIVE:
            return Rejected(reason=f"candidate {found.id} is {found.state.value}; only an active one is approved")
        signals, _ = self._signals_of(found)
        reply = self.context.ask(TASKS, Submit(request=approval.task_request(found),
                                               brief=approval.task_brief(found, signals), origin=approval.ORIGIN,
                                               idempotency_key=approval.task_key(found.id)))
        if not isinstance(reply, Submitted):
            return Rejected(reason=f"the task queue refused the task: {reply.reason}")
        task = reply.task
        approved = dataclasses.replace(found, state=CandidateState.APPROVED, task_id=task.id, updated_at=time.time())
        self.records.decide(approved, _event("approved", found.id, detail=f"task {task.id} by {message.origin}"))
        self._count_states()
        return Approved(candidate_id=found.id, task_id=task.id, existing=reply.existing)

    def _remove(self, message: Remove) -> Removed | UnknownCandidate | Rejected:
        if not is_human(message.origin):
            return Rejected(reason=f"removing a candidate needs a human (the owner's CLI or chat), not "
                                   f"{message.origin or 'an unnamed origin'}")
        if not message.reason.strip():
            return Rejected(reason="a removal needs a reason")
        found = self.candidate(message.candidate_id)
        if found is None:
            return UnknownCandidate(candidate_id=message.candidate_id)
        if found.state is not CandidateState.ACTIVE:
            return Rejected(reason=f"candidate {found.id} is {found.state.value}; only an active one is removed")
        detail = message.reason.strip()
        if message.suggestion_id:
            suggestion, problem = self._suggestion(message.suggestion_id)
            problem = problem or curation.suggestion_mismatch(suggestion, found.id, message.removal_class)
            if problem:
                return Rejected(reason=problem)
            if suggestion is not None:
                detail = f"{suggestion.removal_class.value} ({suggestion.id}): {detail}"
        removed = dataclasses.replace(found, state=CandidateState.REMOVED, updated_at=time.time())
        self.records.decide(removed, _event("removed", found.id, detail=f"{detail} (by {message.origin})"))
        self._count_states()
        set_signals(self.context, removed, SignalState.DISMISSED)
        return Removed(candidate=removed)

    def _suggestion(self, suggestion_id: str) -> tuple[RemovalSuggestion | None, str]:
        proposal = self.records.proposal(suggestion_id.rpartition("-r")[0])
        suggestion = next((s for s in proposal.removal_suggestions if s.id == suggestion_id), None) \
            if proposal is not None else None
        if suggestion is None:
            return None, f"no removal suggestion {suggestion_id}"
        return suggestion, ""

__all__ = ["CANDIDATES", "DATABASES", "CuratorActor"]
