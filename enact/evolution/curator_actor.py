"""The Curator: improvement candidates from evidence, proposals, and a
human's approval into an ordinary task.

Owns ``evolution.candidates`` (key: the candidate id), ``evolution.proposals``
and ``evolution.audit`` (append logs) and ``evolution.settings`` (the evolve
mode, written by ``enact.evolution.mode_store``, and when each theme was last
brainstormed). The rules are plain modules in ``enact.evolution``; this actor
routes each message to the part that handles it and answers the reads itself:

- ``_curator_proposals``: a proposal's stages (synthesis, then curation,
  each a model call off the actor's thread, ``off_thread``, so the actor
  stays responsive while a model thinks);
- ``_curator_decisions``: the owner's approval and removal;
- ``_curator_adoption``: an approved candidate following its task to a
  landed review;
- ``_curator_signals``: what it asks and tells the scanner;
- ``_evolve_schedule`` and ``_evolve_brainstorm``: the evolve mode and
  brainstorming.
"""

from __future__ import annotations

from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.evolution import ranking
from enact.evolution.brainstorms import Brainstorms
from enact.evolution.candidates import CandidateState
from enact.evolution.curator_adoption import Adoption
from enact.evolution.curator_decisions import Decisions
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
    GetMode,
    History,
    Propose,
    Remove,
    SetMode,
    Show,
    SignalView,
)
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged
from enact.runtime import Runtime


class _Reconcile:
    """Catch up with task and review changes published while this actor was down."""


class CuratorActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self.records = CuratorRecords(context.own_store())
        settings = self.records.settings
        self._proposals = Proposals(context, self.records, runtime, off_thread=self.off_thread,
                                    stored=self._count_states)
        self._decisions = Decisions(context, self.records, stored=self._count_states)
        self._adoption = Adoption(context, self.records, stored=self._count_states)
        self._modes = EvolveModes(self.records.store, settings, context.config.typed(EvolutionSettings),
                                  audit=self.records.append_event)
        self._brainstorms = Brainstorms(context, settings=settings, candidates=self.records.candidates,
                                        audit=self.records.append_event, runtime=runtime,
                                        off_thread=self.off_thread, stored=self._count_states)

    def on_start(self) -> None:
        self._count_states()
        if self.context.fence.is_current():
            self.records.index_audit()
            self._modes.forget_former_clock()
        self.actor_ref.tell(_Reconcile())  # after start: the actors it asks are running by then

    def handle(self, message: Any) -> Any:
        match message:
            case Propose():
                return self._proposals.propose(message)
            case Candidates():
                return self._list(message)
            case Show():
                return self._show(message)
            case Approve():
                return self._decisions.approve(message)
            case Remove():
                return self._decisions.remove(message)
            case History():
                return self._history(message)
            case TaskChanged():
                return self._adoption.task_changed(message)
            case Landed():
                return self._adoption.landed(message)
            case _Reconcile():
                return self._adoption.reconcile()
            case SetMode():
                return self._modes.set_mode(message)
            case GetMode():
                return self._modes.shown()
            case EvolveRunFailed():
                return self._modes.run_failed(message)
            case Brainstorm():
                return self._brainstorms.start(message)
        return super().handle(message)

    def _count_states(self) -> None:
        for state, count in self.records.state_counts().items():
            self.context.metrics.of(EvolutionMetrics).candidates.labels(state=state.value).set(count)

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
        signals, note = signals_of(self.context, found)
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
