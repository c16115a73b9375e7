"""The Curator: improvement candidates from evidence, proposals, and a
human's approval into an ordinary task.

Owns ``evolution.candidates`` (key: the candidate id), ``evolution.proposals``
and ``evolution.audit`` (append logs) and ``evolution.settings`` (the evolve
mode, written by ``enact.evolution.mode_store``, and when each theme was last
brainstormed). The rules are plain objects in ``enact.evolution`` over its
tables, each step taking the time and yielding the effects it needs
(``curator_effects``: asks and tells to other actors, model calls, what is
counted); this actor routes each message to the part that handles it,
carries out the effects (``carry``) and answers the reads itself:

- ``curator_proposals``: a proposal's stages (synthesis, then curation,
  each a model call off the actor's thread, ``off_thread``, so the actor
  stays responsive while a model thinks);
- ``curator_decisions``: the owner's approval and removal;
- ``curator_adoption``: an approved candidate following its task to a
  landed review;
- ``curator_signals``: what it asks and tells the scanner;
- ``mode_store`` and ``brainstorms``: the evolve mode and brainstorming.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.cancellation import CancellationToken
from enact.config import RuntimeSettings
from enact.evolution import ranking
from enact.evolution.brainstorms import Brainstorms
from enact.evolution.candidates import CandidateState
from enact.evolution.curator_adoption import Adoption
from enact.evolution.curator_decisions import Decisions
from enact.evolution.curator_effects import (
    Ask,
    CandidatesChanged,
    Effect,
    ModelCall,
    ProposalRecorded,
    Steps,
    Tell,
    Unanswered,
    run_steps,
)
from enact.evolution.curator_proposals import Proposals
from enact.evolution.curator_records import CANDIDATES, DATABASES, CuratorRecords
from enact.evolution.curator_signals import signals_of
from enact.evolution.metrics import EvolutionMetrics
from enact.evolution.mode_store import EvolveModes
from enact.evolution.settings import EvolutionSettings
from enact.messages.common import NotFound, RefusalCode, Refused
from enact.messages.curator import (
    MAX_LIST,
    Approve,
    Brainstorm,
    CandidateList,
    Candidates,
    CandidateShown,
    EvolveHistory,
    EvolveRunFailed,
    EvolveRunSkipped,
    GetMode,
    History,
    Offer,
    Propose,
    Remove,
    SetMode,
    Show,
    SignalView,
)
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged
from enact.runtime import Runtime, RuntimeRequest
from enact.tasks.repositories import own_checkout

R = TypeVar("R")


class _Reconcile:
    """Catch up with task and review changes published while this actor was down."""


class CuratorActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self.records = CuratorRecords(context.own_store())
        settings = self.records.settings
        self._runtime = runtime
        self._proposals = Proposals(self.records, is_current=context.fence.is_current)
        self._decisions = Decisions(self.records)
        self._adoption = Adoption(self.records)
        self._modes = EvolveModes(self.records.store, settings, context.config.typed(EvolutionSettings),
                                  audit=self.records.append_event)
        self._brainstorms = Brainstorms(self.records.store, settings=settings, candidates=self.records.candidates,
                                        audit=self.records.append_event, is_current=context.fence.is_current)

    def on_start(self) -> None:
        self._count_states()
        if self.context.fence.is_current():
            self.records.index_audit()
            self._modes.forget_former_clock()
        self.actor_ref.tell(_Reconcile())  # after start: the actors it asks are running by then

    def handle(self, message: Any) -> Any:
        now = self.context.clock.time()
        match message:
            case Propose():
                return self.carry(self._proposals.propose(message, now))
            case Candidates():
                return self._list(message)
            case Show():
                return self._show(message)
            case Approve():
                # A candidate improves enact: by default its task works on
                # the checkout this daemon runs, wherever the owner stands.
                named = dataclasses.replace(message, repo=message.repo or own_checkout())
                return self.carry(self._decisions.approve(named, now))
            case Remove():
                return self.carry(self._decisions.remove(message, now))
            case Offer():
                return self.carry(self._decisions.offer(message, now))
            case History():
                return self._history(message)
            case TaskChanged():
                return self.carry(self._adoption.task_changed(message, now))
            case Landed():
                return self.carry(self._adoption.landed(message, now))
            case _Reconcile():
                return self.carry(self._adoption.reconcile(now))
            case SetMode():
                return self._modes.set_mode(message, now)
            case GetMode():
                return self._modes.shown()
            case EvolveRunFailed():
                return self._modes.run_failed(message, now)
            case EvolveRunSkipped():
                return self._modes.run_skipped(message, now)
            case Brainstorm():
                return self.carry(self._brainstorms.start(message, now))
        return super().handle(message)

    def _count_states(self) -> None:
        for state, count in self.records.state_counts().items():
            self.context.metrics.of(EvolutionMetrics).candidates.labels(state=state.value).set(count)

    # -- the parts' effects -------------------------------------------------

    def carry(self, steps: Steps[R]) -> R:
        """Run a part's step to its reply, carrying out each effect it yields."""
        return run_steps(steps, self._carry_out)

    def _carry_out(self, effect: Effect) -> object:
        match effect:
            case Ask():
                try:
                    return self.context.ask(effect.actor, effect.message)
                except ActorUnavailable as error:
                    if not effect.guarded:
                        raise
                    return Unanswered(str(error))
            case Tell():
                try:
                    self.context.tell(effect.actor, effect.message)
                except ActorUnavailable as error:
                    return Unanswered(str(error))
            case ModelCall():
                self._call_model(effect)
            case CandidatesChanged():
                self._count_states()
            case ProposalRecorded():
                self.context.metrics.of(EvolutionMetrics).proposals.inc()
        return None

    def _call_model(self, effect: ModelCall) -> None:
        """One isolated, read-only model call off this actor's thread; its
        answer is the step ``effect.then`` carries on with, on it."""
        timeout_s = self.context.config.typed(RuntimeSettings).timeout_s

        def call(cancel: CancellationToken) -> tuple[str, str]:
            request = RuntimeRequest(session_key="", prompt=effect.prompt, sandbox="read-only",
                                     purpose=effect.purpose, timeout_s=timeout_s, cancel=cancel)
            try:
                return self._runtime.invoke(request).text, ""
            except Exception as error:  # a model failure of any kind: the step says so
                return "", f"the model call failed: {type(error).__name__}: {error}"

        self.off_thread(call, then=lambda outcome: self.carry(effect.then(*outcome, self.context.clock.time())))

    # -- reading ------------------------------------------------------------

    def _list(self, message: Candidates) -> CandidateList | Refused:
        if not 1 <= message.limit <= MAX_LIST:
            return Refused(reason=f"limit must be between 1 and {MAX_LIST}", code=RefusalCode.INVALID)
        if message.state and message.state not in set(CandidateState):
            return Refused(reason=f"unknown state {message.state!r}; one of "
                                  + ", ".join(state.value for state in CandidateState), code=RefusalCode.INVALID)
        chosen = [c for c in self.records.all_candidates() if not message.state or c.state.value == message.state]
        rescored = ranking.rescored(chosen, self.context.clock.time())
        return CandidateList(candidates=tuple(ranking.diverse(rescored, message.limit)))

    def _show(self, message: Show) -> CandidateShown | NotFound:
        found = self.records.candidate(message.candidate_id)
        if found is None:
            return NotFound(kind="candidate", id=message.candidate_id)
        signals, note = self.carry(signals_of(found))
        views = tuple(SignalView(id=s.id, source=s.source, observation=s.observation, confidence=s.confidence,
                                 explicit=s.explicit, evidence_refs=s.evidence_refs, state=str(s.state))
                      for s in signals)
        audit = tuple(self.records.candidate_events(found.id))
        return CandidateShown(candidate=found, signals=views, audit=audit, signals_note=note)

    def _history(self, message: History) -> EvolveHistory | Refused:
        if not 1 <= message.limit <= MAX_LIST:
            return Refused(reason=f"limit must be between 1 and {MAX_LIST}", code=RefusalCode.INVALID)
        return EvolveHistory(events=tuple(self.records.events(message.limit)),
                             proposals=tuple(self.records.newest_proposals(10)))


__all__ = ["CANDIDATES", "DATABASES", "CuratorActor"]
