"""The owner's decisions on a candidate: approval into an ordinary task
(under an idempotency key from the candidate's id, so approving twice
queues one task) and removal (kept with state ``removed``, its signals
dismissed). Both need a human origin; a model action is refused. Each is a
step of effects (``enact.evolution.curator_effects``), the time its argument."""

from __future__ import annotations

import dataclasses

from enact.evolution import approval, curation, guard
from enact.evolution.candidates import LINEAGE, Candidate, CandidateState
from enact.evolution.curator_effects import CandidatesChanged, Steps, ask, ask_or_unanswered, counted
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.curator_records import audit_event as _event
from enact.evolution.curator_signals import set_signals, signals_of
from enact.evolution.signals import SignalState
from enact.messages.common import NotFound, RefusalCode, Refused, is_human
from enact.messages.curator import (
    Approve,
    Approved,
    Offer,
    Offered,
    RemovalSuggestion,
    Remove,
    Removed,
)

TASKS = "tasks"
OFFERED_SOURCES = ("skill", LINEAGE)
"""Candidate sources another component assesses and offers (``curator.Offer``)."""
INSTALLED_ON_APPROVAL = {"skill": "skills"}
"""A source whose approval is carried out by an actor (its name), not a task."""


def _needs_human(origin: str, verb: str) -> Refused | None:
    if is_human(origin):
        return None
    return Refused(reason=f"{verb} a candidate needs a human (the owner's CLI or chat), not "
                          f"{origin or 'an unnamed origin'}", code=RefusalCode.NOT_HUMAN)


def _not_found(candidate_id: str) -> NotFound:
    return NotFound(kind="candidate", id=candidate_id)


class Decisions:
    def __init__(self, records: CuratorRecords) -> None:
        self._records = records

    def approve(self, message: Approve, now: float) -> Steps[Approved | NotFound | Refused]:
        from enact.messages.tasks import Submit, Submitted

        refused = _needs_human(message.origin, "approving")
        if refused is not None:
            return refused
        found = self._records.candidate(message.candidate_id)
        if found is None:
            return _not_found(message.candidate_id)
        if found.state is not CandidateState.ACTIVE and found.task_id is not None:
            return Approved(candidate_id=found.id, task_id=found.task_id, existing=True)
        if found.state is not CandidateState.ACTIVE:
            return Refused(reason=f"candidate {found.id} is {found.state.value}; only an active one is approved",
                           code=RefusalCode.WRONG_STATE)
        if found.draft.source in INSTALLED_ON_APPROVAL:
            return (yield from self._install(found, message, now))
        signals, _ = yield from signals_of(found)
        reply = yield from ask(TASKS, Submit(request=approval.task_request(found),
                                             brief=approval.task_brief(found, signals), repo=message.repo,
                                             origin=approval.ORIGIN,
                                             idempotency_key=approval.task_key(found.id)))
        if not isinstance(reply, Submitted):
            return Refused(reason=f"the task queue refused the task: {reply.reason}", code=reply.code)
        task = reply.task
        approved = dataclasses.replace(found, state=CandidateState.APPROVED, task_id=task.id, updated_at=now)
        self._records.decide(approved, _event("approved", found.id, at=now,
                                              detail=f"task {task.id} by {message.origin}"))
        yield from counted(CandidatesChanged())
        return Approved(candidate_id=found.id, task_id=task.id, existing=reply.existing)

    def _install(self, found: Candidate, message: Approve, now: float) -> Steps[Approved | NotFound | Refused]:
        """A skill candidate's approval installs the skill it names (or, proposed by the skills' use,
        removes it) and makes no task: adopted at once."""
        from enact.messages.skills import Install, Installed

        reply = yield from ask_or_unanswered(INSTALLED_ON_APPROVAL[found.draft.source],
                                             Install(candidate_id=found.id, origin=message.origin))
        if not isinstance(reply, Installed):
            reason = reply.line if isinstance(reply, NotFound) else reply.reason
            return Refused(reason=f"the skill was not installed: {reason}", code=RefusalCode.WRONG_STATE)
        adopted = dataclasses.replace(found, state=CandidateState.ADOPTED, updated_at=now)
        done = "skill-removed" if reply.removed else "installed"
        self._records.decide(adopted, _event(done, found.id, at=now,
                                             detail=f"skill {reply.skill.name} at {reply.skill.revision} "
                                                    f"by {message.origin}"))
        yield from counted(CandidatesChanged())
        if reply.removed:
            return Approved(candidate_id=found.id, task_id=None, existing=False, removed=reply.skill.name)
        return Approved(candidate_id=found.id, task_id=None, existing=False, installed=reply.skill.name)

    def offer(self, message: Offer, now: float) -> Steps[Offered | Refused]:
        """Keep a candidate another component assessed (``curator.Offer``)."""
        draft = message.draft
        if draft.source not in OFFERED_SOURCES:
            return Refused(reason=f"no candidate of source {draft.source!r} is offered", code=RefusalCode.INVALID)
        refused = guard.refusal({"title": draft.title, "proposed_change": draft.proposed_change})
        if refused:
            return Refused(reason=f"rejected: {refused}", code=RefusalCode.INVALID)
        if self._records.candidate(draft.id) is not None:
            return Offered(candidate_id=draft.id, existing=True)
        self._records.offer(Candidate(id=draft.id, draft=draft, state=CandidateState.ACTIVE, created_at=now,
                                      updated_at=now, reference=message.reference, score=message.score),
                            _event("offered", draft.id, at=now, detail=f"{draft.title} (by {message.origin})"))
        yield from counted(CandidatesChanged())
        return Offered(candidate_id=draft.id, existing=False)

    def remove(self, message: Remove, now: float) -> Steps[Removed | NotFound | Refused]:
        refused = _needs_human(message.origin, "removing")
        if refused is not None:
            return refused
        if not message.reason.strip():
            return Refused(reason="a removal needs a reason", code=RefusalCode.INVALID)
        found = self._records.candidate(message.candidate_id)
        if found is None:
            return _not_found(message.candidate_id)
        if found.state is not CandidateState.ACTIVE:
            return Refused(reason=f"candidate {found.id} is {found.state.value}; only an active one is removed",
                           code=RefusalCode.WRONG_STATE)
        detail = message.reason.strip()
        if message.suggestion_id:
            suggestion, problem = self._suggestion(message.suggestion_id)
            problem = problem or curation.suggestion_mismatch(suggestion, found.id, message.removal_class)
            if problem:
                return Refused(reason=problem, code=RefusalCode.INVALID)
            if suggestion is not None:
                detail = f"{suggestion.removal_class.value} ({suggestion.id}): {detail}"
        removed = dataclasses.replace(found, state=CandidateState.REMOVED, updated_at=now)
        self._records.decide(removed, _event("removed", found.id, at=now, detail=f"{detail} (by {message.origin})"))
        yield from counted(CandidatesChanged())
        yield from set_signals(removed, SignalState.DISMISSED)
        return Removed(candidate=removed)

    def _suggestion(self, suggestion_id: str) -> tuple[RemovalSuggestion | None, str]:
        proposal = self._records.proposal(suggestion_id.rpartition("-r")[0])
        suggestion = next((s for s in proposal.removal_suggestions if s.id == suggestion_id), None) \
            if proposal is not None else None
        if suggestion is None:
            return None, f"no removal suggestion {suggestion_id}"
        return suggestion, ""
