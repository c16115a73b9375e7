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

import lmdb

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred
from enact.actors._evolve_brainstorm import BrainstormAnswered, Brainstorms
from enact.actors._evolve_schedule import EvolveModes
from enact.evolution import approval, curation, ranking, synthesis
from enact.evolution.candidates import Candidate, CandidateState
from enact.evolution.signals import Signal, SignalState
from enact.messages.common import Rejected, is_human
from enact.messages.curator import (
    MAX_LIST,
    Approve,
    Approved,
    AuditEvent,
    Brainstorm,
    CandidateList,
    Candidates,
    CandidateShown,
    EvolveClockChanged,
    EvolveHistory,
    GetMode,
    History,
    Proposal,
    ProposalState,
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
from enact.storage import AppendLog, RecordTable, decode_record

log = logging.getLogger(__name__)

CANDIDATES = "evolution.candidates"
PROPOSALS = "evolution.proposals"
AUDIT = "evolution.audit"
SETTINGS = "evolution.settings"
DATABASES = (CANDIDATES, PROPOSALS, AUDIT, SETTINGS)
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
        self._store = context.own_store()
        self._candidates = RecordTable(self._store.table(CANDIDATES), Candidate)
        self._proposal_log = self._store.log(PROPOSALS)
        self._proposals = RecordTable(self._proposal_log, Proposal)
        self._audit_log = self._store.log(AUDIT)
        self._settings = self._store.table(SETTINGS)
        self._runtime = runtime
        self._running: _Run | None = None
        self._modes = EvolveModes(self._store, self._settings, context.config)
        self._brainstorms = Brainstorms(context, settings=self._settings, candidates=self._candidates,
                                        audit=self._audit_log, runtime=runtime, stored=self._count_states)

    def on_start(self) -> None:
        self._count_states()
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
                return self._task_changed(message)
            case Landed():
                return self._landed(message)
            case _Reconcile():
                return self._reconcile()
            # Evolve modes and brainstorming (enact.actors._evolve_schedule, _evolve_brainstorm).
            case SetMode():
                return self._modes.set_mode(message)
            case GetMode():
                return self._modes.shown()
            case EvolveClockChanged():
                return self._modes.clock_changed(message)
            case Brainstorm():
                return self._brainstorms.start(message)
            case BrainstormAnswered():
                return self._brainstorms.answered(message)
        return super().handle(message)

    # -- records ----------------------------------------------------------

    def all_candidates(self) -> list[Candidate]:
        return self._store.read(lambda txn: [candidate for _, candidate in self._candidates.items(txn)])

    def candidate(self, candidate_id: str) -> Candidate | None:
        if not candidate_id or len(candidate_id) > 64:
            return None
        return self._store.read(lambda txn: self._candidates.get(txn, candidate_id.encode()))

    def _write(self, fn: Callable[[lmdb.Transaction], Any], *events: AuditEvent) -> Any:
        def write(txn: lmdb.Transaction) -> Any:
            result = fn(txn)
            for event in events:
                self._audit_log.append(txn, _plain(event))
            return result

        result = self._store.write(write)
        self._count_states()
        return result

    def _put(self, candidate: Candidate, *events: AuditEvent) -> Candidate:
        self._write(lambda txn: self._candidates.put(txn, candidate.id.encode(), candidate), *events)
        return candidate

    def _count_states(self) -> None:
        counts = dict.fromkeys(CandidateState, 0)
        for candidate in self.all_candidates():
            counts[candidate.state] += 1
        for state, count in counts.items():
            self.context.metrics.evolution_candidates.labels(state=state.value).set(count)

    def open_proposal(self) -> Proposal | None:
        def read(txn: lmdb.Transaction) -> Proposal | None:
            for sequence, document in self._proposal_log.iterate_backwards(txn):
                proposal = decode_record(Proposal, document, database=PROPOSALS, key=AppendLog.key(sequence))
                if proposal.state is ProposalState.OPEN:
                    return proposal
            return None

        return self._store.read(read)

    # -- proposing ----------------------------------------------------------

    def _propose(self, message: Propose) -> Deferred | Rejected:
        if self._running is not None:
            return Rejected(reason="a proposal is being made now; propose again once it is done")
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
            reply = self.context.ask(SCANNER, Signals(state="active", limit=synthesis.MAX_SIGNALS))
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
                self._write(lambda txn: None, _event("linked", candidate_id,
                                                     detail=f"repaired: linked {', '.join(signal_ids)}"))
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
        run = message.run
        try:
            drafts = synthesis.parse(message.answer, message.signals) if not message.failure else []
            problem = message.failure
        except synthesis.SynthesisError as error:
            drafts, problem = [], str(error)
        if problem:
            run.notes.append(f"synthesis rejected: {problem}")
            self._write(lambda txn: None, _event("synthesis-rejected", detail=problem))
        now = time.time()
        for draft in drafts:
            known = self.candidate(draft.id)
            if known is None:
                made = synthesis.candidate(draft, message.signals, now)
                self._put(made, _event("synthesised", made.id, detail=f"{made.title} (score {made.score:.3f})"))
            run.synthesised.append(draft.id)
            self._link(draft.id, draft.evidence_ids)
        self._guarded(run, lambda: self._curate(run))

    def _curate(self, run: _Run) -> None:
        shown = curation.shown(self.all_candidates())
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
        try:
            if message.failure:
                raise curation.CurationError(message.failure)
            verdict = curation.parse(message.answer, message.shown, message.records)
        except curation.CurationError as error:
            verdict = curation.fallback(message.shown, str(error))
        self._guarded(message.run, lambda: self._record(message.run, verdict, message.shown))

    def _guarded(self, run: _Run, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as error:
            self._running = None
            run.reply.fail(error)
            raise

    def _record(self, run: _Run, verdict: curation.Curation, shown: list[Candidate]) -> None:
        now = time.time()

        def write(txn: lmdb.Transaction) -> Proposal:
            earlier = [(sequence, decode_record(Proposal, document, database=PROPOSALS, key=AppendLog.key(sequence)))
                       for sequence, document in self._proposal_log.iterate_backwards(txn)]
            for sequence, proposal in earlier:
                if proposal.state is ProposalState.OPEN:
                    self._proposals.put(txn, AppendLog.key(sequence),
                                        dataclasses.replace(proposal, state=ProposalState.SUPERSEDED))
                    self._audit_log.append(txn, _plain(_event("superseded", proposal_id=proposal.id)))
            sequence = self._proposal_log.last_cursor(txn) + 1
            proposal_id = f"prop-{sequence}"
            suggestions = tuple(
                RemovalSuggestion(id=f"{proposal_id}-r{number}", candidate_id=item.candidate_id,
                                  removal_class=item.removal_class, reason=item.reason, refs=item.refs)
                for number, item in enumerate(verdict.removals, start=1))
            proposal = Proposal(id=proposal_id, candidate_id=verdict.recommended, reason=verdict.reason,
                                guidance=verdict.guidance, fallback=verdict.fallback,
                                removal_suggestions=suggestions, state=ProposalState.OPEN, created_at=now,
                                candidates=tuple(candidate.id for candidate in shown))
            self._proposals.put(txn, AppendLog.key(sequence), proposal)
            detail = ("fallback: " if verdict.fallback else "") + verdict.reason
            self._audit_log.append(txn, _plain(_event("proposed", verdict.recommended or "", proposal_id,
                                                      detail=detail[:1000])))
            return proposal

        try:
            proposal = self._store.write(write)
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
        return CandidateList(candidates=tuple(ranking.diverse(chosen, message.limit)))

    def _show(self, message: Show) -> CandidateShown | UnknownCandidate:
        found = self.candidate(message.candidate_id)
        if found is None:
            return UnknownCandidate(candidate_id=message.candidate_id)
        signals, note = self._signals_of(found)
        views = tuple(SignalView(id=s.id, source=s.source, observation=s.observation, confidence=s.confidence,
                                 explicit=s.explicit, evidence_refs=s.evidence_refs, state=str(s.state))
                      for s in signals)
        audit = tuple(event for event in self._events(limit=10_000) if event.candidate_id == found.id)
        return CandidateShown(candidate=found, signals=views, audit=audit, signals_note=note)

    def _signals_of(self, candidate: Candidate) -> tuple[list[Signal], str]:
        if not candidate.evidence_ids:
            return [], ""
        from enact.messages.scanner import SignalList, Signals

        wanted = set(candidate.evidence_ids)
        try:
            reply = self.context.ask(SCANNER, Signals(state="", limit=MAX_LIST))
        except ActorUnavailable as error:
            return [], f"the scanner did not answer: {error}"
        found = [signal for signal in reply.signals if signal.id in wanted] if isinstance(reply, SignalList) else []
        return found, ""

    def _events(self, limit: int) -> list[AuditEvent]:
        def read(txn: lmdb.Transaction) -> list[AuditEvent]:
            events = []
            for sequence, document in self._audit_log.iterate_backwards(txn):
                events.append(decode_record(AuditEvent, document, database=AUDIT, key=AppendLog.key(sequence)))
                if len(events) >= limit:
                    break
            return events

        return self._store.read(read)

    def _history(self, message: History) -> EvolveHistory | Rejected:
        if not 1 <= message.limit <= MAX_LIST:
            return Rejected(reason=f"limit must be between 1 and {MAX_LIST}")

        def proposals(txn: lmdb.Transaction) -> list[Proposal]:
            found = []
            for sequence, document in self._proposal_log.iterate_backwards(txn):
                found.append(decode_record(Proposal, document, database=PROPOSALS, key=AppendLog.key(sequence)))
                if len(found) >= 10:
                    break
            return found

        return EvolveHistory(events=tuple(self._events(message.limit)),
                             proposals=tuple(self._store.read(proposals)))

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
        proposal = self.open_proposal()

        def write(txn: lmdb.Transaction) -> None:
            self._candidates.put(txn, found.id.encode(), approved)
            if proposal is not None and proposal.candidate_id == found.id:
                sequence = int(proposal.id.removeprefix("prop-"))
                self._proposals.put(txn, AppendLog.key(sequence),
                                    dataclasses.replace(proposal, state=ProposalState.APPROVED))

        self._write(write, _event("approved", found.id, proposal.id if proposal else "",
                                  detail=f"task {task.id} by {message.origin}"))
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
        self._put(removed, _event("removed", found.id, detail=f"{detail} (by {message.origin})"[:1000]))
        self._set_signals(removed, SignalState.DISMISSED)
        return Removed(candidate=removed)

    def _suggestion(self, suggestion_id: str) -> tuple[RemovalSuggestion | None, str]:
        proposal_id = suggestion_id.rpartition("-r")[0]
        number = proposal_id.removeprefix("prop-")
        if not number.isdigit():
            return None, f"{suggestion_id!r} is not a removal suggestion's id (like prop-3-r1)"
        proposal = self._store.read(lambda txn: self._proposals.get(txn, AppendLog.key(int(number))))
        suggestion = next((s for s in proposal.removal_suggestions if s.id == suggestion_id), None) \
            if proposal is not None else None
        if suggestion is None:
            return None, f"no removal suggestion {suggestion_id}"
        return suggestion, ""

    # -- adoption -----------------------------------------------------------

    def _by_task(self, task_id: int) -> Candidate | None:
        return next((c for c in self.all_candidates() if c.task_id == task_id), None)

    def _task_changed(self, message: TaskChanged) -> None:
        task = message.task
        if not task.idempotency_key.startswith("evolve:"):
            return
        found = self._by_task(task.id)
        if found is None or found.state is not CandidateState.APPROVED:
            return
        if task.review_id and task.review_id != found.review_id:
            self._put(dataclasses.replace(found, review_id=task.review_id, updated_at=time.time()),
                      _event("review-recorded", found.id, detail=f"task {task.id} opened review {task.review_id}"))
        elif task.state.ended and not task.review_id:
            self._write(lambda txn: None, _event("task-ended", found.id,
                                                 detail=f"task {task.id} {task.state.value}: {task.summary}"[:1000]))

    def _landed(self, message: Landed) -> None:
        review = message.review
        found = self._by_task(review.task_id)
        if found is None or found.state is not CandidateState.APPROVED:
            return
        self._adopt(found, str(review.id))

    def _adopt(self, found: Candidate, review_id: str) -> None:
        adopted = dataclasses.replace(found, state=CandidateState.ADOPTED, review_id=review_id,
                                      updated_at=time.time())
        self._put(adopted, _event("adopted", found.id, detail=f"review {review_id} landed"))
        self._set_signals(adopted, SignalState.RESOLVED)

    def _set_signals(self, candidate: Candidate, state: SignalState) -> None:
        from enact.messages.scanner import SetSignalState

        if candidate.evidence_ids:
            try:
                self.context.tell(SCANNER, SetSignalState(signal_ids=candidate.evidence_ids, state=state))
            except ActorUnavailable as error:
                log.warning("signals of %s %s not marked %s: %s", candidate.state.value, candidate.id, state, error)

    def _reconcile(self) -> None:
        """An approved candidate whose task or review moved on while this
        actor was not running (its events were not told to it)."""
        from enact.messages.reviews import Found as ReviewFound
        from enact.messages.reviews import Get as GetReview
        from enact.messages.reviews import ReviewState
        from enact.messages.tasks import Found, Get

        for found in self.all_candidates():
            if found.state is not CandidateState.APPROVED or found.task_id is None:
                continue
            try:
                task = self.context.ask(TASKS, Get(task_id=found.task_id))
                review_id = task.task.review_id if isinstance(task, Found) else found.review_id
                review = self.context.ask(REVIEWS, GetReview(review_id=int(review_id))) \
                    if review_id.isdigit() else None
            except ActorUnavailable as error:
                log.warning("approved candidates not reconciled: %s", error)
                return
            if isinstance(review, ReviewFound) and review.review.state is ReviewState.LANDED:
                self._adopt(found, review_id)
            elif review_id and review_id != found.review_id:
                self._put(dataclasses.replace(found, review_id=review_id, updated_at=time.time()),
                          _event("review-recorded", found.id, detail=f"review {review_id} (reconciled)"))


def _event(kind: str, candidate_id: str = "", proposal_id: str = "", *, detail: str = "") -> AuditEvent:
    return AuditEvent(at=time.time(), kind=kind, candidate_id=candidate_id, proposal_id=proposal_id, detail=detail)


def _plain(event: AuditEvent) -> dict[str, Any]:
    return dataclasses.asdict(event)


__all__ = ["DATABASES", "CuratorActor"]
