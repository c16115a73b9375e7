"""The curator's parts driven without threads: real LMDB in a tmp dir, the
time an argument, and each effect a step yields answered here, as the
curator actor would carry it out (asks answered by the other actors'
replies, a model call continued by hand with its answer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest

from enact.evolution import curator_records
from enact.evolution.brainstorms import Brainstorms
from enact.evolution.candidates import Candidate, CandidateState, Draft
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
from enact.evolution.curator_records import CuratorRecords
from enact.evolution.signals import EvidenceSource, Signal, SignalState
from enact.messages.common import HUMAN_CLI, MODEL_ACTION, RefusalCode, Refused
from enact.messages.curator import Approve, Approved, Brainstorm, Brainstormed, Propose, Proposed, Remove, Removed
from enact.messages.reviews import Found as ReviewFound
from enact.messages.reviews import Get as GetReview
from enact.messages.reviews import Landed, Review, ReviewList, ReviewState
from enact.messages.reviews import List as ListReviews
from enact.messages.scanner import LinkSignals, SetSignalState, SignalList, Signals, SignalsLinked
from enact.messages.tasks import Found, Get, Submit, Submitted, TaskPage
from enact.messages.tasks import List as ListTasks
from enact.storage import Storage
from enact.tasks.records import Phase, Task, TaskState

NOW = 1_800_000_000.0
R = TypeVar("R")


@pytest.fixture
def records(tmp_path: Path) -> Iterator[CuratorRecords]:
    storage = Storage(tmp_path / "state")
    try:
        yield CuratorRecords(storage.grant("curator", curator_records.DATABASES))
    finally:
        storage.close()


class Others:
    """The other actors: what each answers, which are down, and every
    effect the curator's step yielded, in order."""

    def __init__(self, answers: dict[type, Callable[[Any], object]] | None = None, *, down: tuple[str, ...] = ()):
        self.answers = answers or {}
        self.down = down
        self.effects: list[Effect] = []

    def __call__(self, effect: Effect) -> object:
        self.effects.append(effect)
        match effect:
            case Ask() | Tell() if effect.actor in self.down:
                assert not isinstance(effect, Ask) or effect.guarded, f"{effect} would fail the step"
                return Unanswered(f"{effect.actor} is not running")
            case Ask():
                return self.answers[type(effect.message)](effect.message)
        return None

    @property
    def said(self) -> list[str]:
        """What was asked or told, as ``actor.Message``."""
        return [f"{e.actor}.{type(e.message).__name__}" for e in self.effects if isinstance(e, Ask | Tell)]

    @property
    def counted(self) -> list[str]:
        return [type(e).__name__ for e in self.effects if isinstance(e, CandidatesChanged | ProposalRecorded)]

    @property
    def model_calls(self) -> list[ModelCall]:
        return [e for e in self.effects if isinstance(e, ModelCall)]


def drive(steps: Steps[R], others: Others) -> R:
    return run_steps(steps, others)


def signal(number: int) -> Signal:
    return Signal(id=f"sig-{number:012d}", source=EvidenceSource.FEEDBACK, observation=f"observation {number}",
                  evidence_type="complaint", affected_area="replies", desired_outcome="shorter replies",
                  confidence=0.8, explicit=True, evidence_refs=(f"turn:{number}",), state=SignalState.ACTIVE,
                  scan_id="scan-1", candidate_id="", created_at=NOW - 100, updated_at=NOW - 100)


def candidate(cid: str, *, state: CandidateState = CandidateState.ACTIVE, task_id: int | None = None) -> Candidate:
    draft = Draft(source="feedback", evidence_ids=(signal(1).id,), title=f"title of {cid}", rationale="because",
                  proposed_change="a small change", expected_benefit="better", risk="low", test_plan="a test")
    return Candidate(id=cid, draft=draft, state=state, task_id=task_id, score=0.5, created_at=NOW - 50,
                     updated_at=NOW - 50)


def task(task_id: int, *, parent: int | None = None, review_id: str = "") -> Task:
    return Task(id=task_id, request=f"work {task_id}", brief="", repo="/r", origin="evolution",
                idempotency_key=f"evolve:{task_id}", repairs=2, deadline_s=600, attempt=1, parent=parent,
                state=TaskState.SUCCEEDED, phase=Phase.NONE, repair=0, confined=None, review_id=review_id,
                worktree="", conversation=None, worker="", lease_expires_at=None, cancel_requested=False,
                not_before=0.0, failure_class=None, summary="done", created_at=NOW - 30, updated_at=NOW - 20,
                started_at=None, finished_at=NOW - 20)


def review(review_id: int, task_id: int, state: ReviewState = ReviewState.LANDED) -> Review:
    return Review(id=review_id, task_id=task_id, repo="/r", branch="b", base="a", head="c", diffstat="",
                  doctor_summary="", state=state, created_at=NOW - 10, updated_at=NOW - 10)


def tasks_by_parent(parents: dict[int, int | None]) -> Callable[[Get], Found]:
    return lambda message: Found(task=task(message.task_id, parent=parents[message.task_id]))


# -- decisions ------------------------------------------------------------------


def test_approving_submits_one_task_under_the_candidates_key_and_records_it_at_the_time_given(
        records: CuratorRecords) -> None:
    records.put(candidate("cand-a"))
    others = Others({Signals: lambda _: SignalList(signals=(signal(1),)),
                     Submit: lambda _: Submitted(task=task(4), existing=False)})
    decisions = Decisions(records)
    assert drive(decisions.approve(Approve(candidate_id="cand-a", origin=HUMAN_CLI), NOW), others) == \
        Approved(candidate_id="cand-a", task_id=4, existing=False)
    assert others.said == ["scanner.Signals", "tasks.Submit"] and others.counted == ["CandidatesChanged"]
    submitted = others.effects[1]
    assert isinstance(submitted, Ask) and isinstance(submitted.message, Submit)
    assert (submitted.message.idempotency_key, submitted.message.origin) == ("evolve:cand-a", "evolution")
    assert "turn:1" in submitted.message.brief  # the signals' evidence, as the scanner answered
    approved = records.candidate("cand-a")
    assert approved is not None and (approved.state, approved.task_id, approved.updated_at) == \
        (CandidateState.APPROVED, 4, NOW)
    assert [(e.kind, e.at) for e in records.candidate_events("cand-a")] == [("approved", NOW)]

    again = Others()  # approved already: its task is the answer, nothing is asked
    assert drive(decisions.approve(Approve(candidate_id="cand-a", origin="chat:tg:1"), NOW + 1), again) == \
        Approved(candidate_id="cand-a", task_id=4, existing=True)
    assert again.effects == []
    refused = drive(decisions.approve(Approve(candidate_id="cand-a", origin=MODEL_ACTION), NOW + 2), again)
    assert isinstance(refused, Refused) and refused.code is RefusalCode.NOT_HUMAN and again.effects == []


def test_a_removal_is_stored_before_its_signals_are_dismissed_and_holds_with_the_scanner_down(
        records: CuratorRecords) -> None:
    records.put(candidate("cand-a"))
    others = Others(down=("scanner",))
    removed = drive(Decisions(records).remove(Remove(candidate_id="cand-a", reason=" not wanted ", origin=HUMAN_CLI),
                                              NOW), others)
    assert isinstance(removed, Removed) and removed.candidate.state is CandidateState.REMOVED
    assert others.counted == ["CandidatesChanged"] and others.said == ["scanner.SetSignalState"]
    told = others.effects[-1]
    assert isinstance(told, Tell) and told.message == SetSignalState(signal_ids=(signal(1).id,),
                                                                     state=SignalState.DISMISSED)
    assert records.candidate("cand-a") == removed.candidate and removed.candidate.updated_at == NOW
    [event] = records.candidate_events("cand-a")
    assert (event.kind, event.at, event.detail) == ("removed", NOW, "not wanted (by human-cli)")


def skill_draft() -> Draft:
    return Draft(source="skill", evidence_ids=(), title="Install the skill tidy-notes (abc)", rationale="adds notes",
                 proposed_change="Install tidy-notes from /r at abc", expected_benefit="install it",
                 risk="Duplicates: nothing", test_plan="skill.read tidy-notes")


def test_an_offered_skill_candidate_is_kept_once_and_its_approval_installs_it_without_a_task(
        records: CuratorRecords) -> None:
    from enact.messages.curator import Offer, Offered
    from enact.messages.skills import Install, Installed, SkillView

    decisions = Decisions(records)
    offered = drive(decisions.offer(Offer(draft=skill_draft(), origin=HUMAN_CLI), NOW), Others())
    assert isinstance(offered, Offered) and not offered.existing
    assert drive(decisions.offer(Offer(draft=skill_draft()), NOW + 1), Others()) == \
        Offered(candidate_id=offered.candidate_id, existing=True)
    unknown = drive(decisions.offer(Offer(draft=candidate("x").draft), NOW), Others())
    assert isinstance(unknown, Refused) and unknown.code is RefusalCode.INVALID

    down = Others(down=("skills",))  # nothing installed, the candidate stays active
    refused = drive(decisions.approve(Approve(candidate_id=offered.candidate_id, origin=HUMAN_CLI), NOW), down)
    assert isinstance(refused, Refused) and "not installed" in refused.reason
    view = SkillView(name="tidy-notes", description="d", source="/r", path="", revision="abc", digests=(),
                     installed_at=NOW, by=HUMAN_CLI)
    others = Others({Install: lambda _: Installed(skill=view)})
    approved = drive(decisions.approve(Approve(candidate_id=offered.candidate_id, origin=HUMAN_CLI), NOW + 2), others)
    assert approved == Approved(candidate_id=offered.candidate_id, task_id=None, existing=False,
                                installed="tidy-notes")
    assert others.said == ["skills.Install"]  # no signals asked, no task submitted
    kept = records.candidate(offered.candidate_id)
    assert kept is not None and kept.state is CandidateState.ADOPTED and kept.task_id is None
    assert [e.kind for e in records.candidate_events(offered.candidate_id)] == ["installed", "offered"]  # newest first


# -- proposals ------------------------------------------------------------------


def synthesis_answer(*signals: Signal) -> str:
    return orjson.dumps([{
        "evidence_ids": [s.id for s in signals], "title": "Keep replies short", "rationale": "the owner asked twice",
        "proposed_change": "cap the reply length in the conversation prompt", "expected_benefit": "less scrolling",
        "risk": "answers lose detail", "test_plan": "a chat test checks a long answer is summarised",
    }]).decode()


def test_a_proposal_goes_stage_by_stage_each_at_the_time_its_step_was_given(records: CuratorRecords) -> None:
    others = Others({Signals: lambda _: SignalList(signals=(signal(1), signal(2))),
                     LinkSignals: lambda message: SignalsLinked(linked=message.signal_ids),
                     ListTasks: lambda _: TaskPage(tasks=(), next_before=None),
                     ListReviews: lambda _: ReviewList(reviews=(), more=False)})
    proposals = Proposals(records, is_current=lambda: True)
    reply = drive(proposals.propose(Propose(origin="scheduler"), NOW), others)
    assert not isinstance(reply, Refused) and not reply.done
    assert others.said == ["scanner.Signals"] and len(others.model_calls) == 1
    busy = drive(proposals.propose(Propose(origin="scheduler"), NOW + 1), Others())
    assert isinstance(busy, Refused) and busy.code is RefusalCode.BUSY

    [synthesis] = others.model_calls
    drive(synthesis.then(synthesis_answer(signal(1), signal(2)), "", NOW + 5), others)
    [made] = records.all_candidates()
    assert (made.created_at, made.draft.evidence_ids) == (NOW + 5, (signal(1).id, signal(2).id))
    assert others.said == ["scanner.Signals", "scanner.LinkSignals", "tasks.List", "reviews.List"]
    assert others.counted == ["CandidatesChanged"] and len(others.model_calls) == 2 and not reply.done

    curation = others.model_calls[1]
    drive(curation.then("", "the model call failed: TimeoutError: slow", NOW + 9), others)
    proposed = reply.wait(0)
    assert isinstance(proposed, Proposed) and proposed.synthesised == (made.id,)
    assert proposed.proposal.fallback and proposed.proposal.created_at == NOW + 9
    assert proposed.proposal.candidate_id == made.id  # the fallback recommends the best shown
    assert others.counted == ["CandidatesChanged", "ProposalRecorded"]
    assert [e.kind for e in records.events(10)] == ["proposed", "synthesised"]
    assert not isinstance(drive(proposals.propose(Propose(), NOW + 10), others), Refused)  # one at a time: done


def test_a_step_failing_after_a_model_call_fails_the_proposals_reply_and_frees_the_next(
        records: CuratorRecords) -> None:
    def broken(message: LinkSignals) -> SignalsLinked:
        raise RuntimeError("the scanner broke")

    others = Others({Signals: lambda _: SignalList(signals=(signal(1),)), LinkSignals: broken})
    proposals = Proposals(records, is_current=lambda: True)
    reply = drive(proposals.propose(Propose(), NOW), others)
    assert not isinstance(reply, Refused)
    [synthesis] = others.model_calls
    with pytest.raises(RuntimeError, match="the scanner broke"):  # the actor fails, as a handler's error does
        drive(synthesis.then(synthesis_answer(signal(1)), "", NOW + 5), others)
    with pytest.raises(RuntimeError, match="the scanner broke"):
        reply.wait(0)
    assert len(records.all_candidates()) == 1  # committed before the link was asked
    quiet = Others({ListTasks: lambda _: TaskPage(tasks=(), next_before=None),
                    ListReviews: lambda _: ReviewList(reviews=(), more=False)}, down=("scanner",))
    assert not isinstance(drive(proposals.propose(Propose(), NOW + 6), quiet), Refused)  # not busy


def test_a_proposal_with_the_scanner_down_records_that_there_was_nothing_to_curate_without_a_model(
        records: CuratorRecords) -> None:
    others = Others(down=("scanner",))
    reply = drive(Proposals(records, is_current=lambda: True).propose(Propose(), NOW), others)
    assert not isinstance(reply, Refused)
    proposed = reply.wait(0)
    assert isinstance(proposed, Proposed) and proposed.proposal.reason == "no active candidates to curate"
    assert proposed.synthesis_note.startswith("the scanner did not answer (scanner is not running)")
    assert others.model_calls == [] and others.counted == ["ProposalRecorded"]


def test_a_fenced_daemon_proposes_and_brainstorms_nothing(records: CuratorRecords) -> None:
    others = Others()
    refused = drive(Proposals(records, is_current=lambda: False).propose(Propose(), NOW), others)
    assert isinstance(refused, Refused) and refused.code is RefusalCode.FENCED
    brainstorms = Brainstorms(records.store, settings=records.settings, candidates=records.candidates,
                              audit=records.append_event, is_current=lambda: False)
    not_brainstormed = drive(brainstorms.start(Brainstorm(theme="clarity"), NOW), others)
    assert isinstance(not_brainstormed, Refused) and not_brainstormed.code is RefusalCode.FENCED
    assert others.effects == []


# -- brainstorms ------------------------------------------------------------------


def test_a_theme_is_claimed_at_the_time_given_before_the_model_is_called_and_its_ideas_stored_after(
        records: CuratorRecords) -> None:
    brainstorms = Brainstorms(records.store, settings=records.settings, candidates=records.candidates,
                              audit=records.append_event, is_current=lambda: True)
    others = Others({ListTasks: lambda _: TaskPage(tasks=(task(3),), next_before=None)})
    reply = drive(brainstorms.start(Brainstorm(theme="  clear   answers "), NOW), others)
    assert not isinstance(reply, Brainstormed | Refused)
    [call] = others.model_calls
    assert others.said == ["tasks.List"] and "task 3" in call.prompt
    assert call.purpose == "brainstorm"  # its own budget and token series, apart from curation's
    # Claimed before the answer: a second brainstorm a day less a second later is skipped.
    skipped = drive(brainstorms.start(Brainstorm(theme="clear answers"), NOW + 86_399), Others())
    assert isinstance(skipped, Brainstormed) and skipped.skipped

    idea = {"evidence_ids": [], "title": "Number the steps", "rationale": "lists read faster",
            "proposed_change": "number steps", "expected_benefit": "clarity", "risk": "none", "test_plan": "a test"}
    drive(call.then(orjson.dumps([idea]).decode(), "", NOW + 7), others)
    done = reply.wait(0)
    assert isinstance(done, Brainstormed) and len(done.candidates) == 1 and others.counted == ["CandidatesChanged"]
    [stored] = records.all_candidates()
    assert stored.brainstorm and stored.theme == "clear answers" and stored.created_at == NOW + 7


# -- adoption ------------------------------------------------------------------


def test_a_landed_review_of_a_retry_adopts_the_candidate_by_the_root_of_its_parent_chain(
        records: CuratorRecords) -> None:
    records.put(candidate("cand-a", state=CandidateState.APPROVED, task_id=4))
    others = Others({Get: tasks_by_parent({9: 7, 7: 4, 4: None, 10: 7})})
    adoption = Adoption(records)
    drive(adoption.landed(Landed(review=review(3, task_id=9), fast_forward=True), NOW), others)
    adopted = records.candidate("cand-a")
    assert adopted is not None and (adopted.state, adopted.review_id, adopted.updated_at) == \
        (CandidateState.ADOPTED, "3", NOW)
    assert others.said == ["tasks.Get", "tasks.Get", "tasks.Get", "scanner.SetSignalState"]
    assert others.effects[-1] == Tell("scanner", SetSignalState(signal_ids=(signal(1).id,),
                                                                state=SignalState.RESOLVED))
    # A parent never changes: another retry of 7 asks only for its own.
    again = Others(others.answers)
    drive(adoption.landed(Landed(review=review(5, task_id=10), fast_forward=True), NOW + 1), again)
    assert again.said == ["tasks.Get"]


def test_a_looping_parent_chain_is_followed_only_so_far_and_adopts_nothing(records: CuratorRecords) -> None:
    records.put(candidate("cand-a", state=CandidateState.APPROVED, task_id=4))
    asked: list[int] = []

    def looping(message: Get) -> Found:
        asked.append(message.task_id)
        return Found(task=task(message.task_id, parent=message.task_id + 1 if message.task_id % 2 else
                               message.task_id - 1))

    drive(Adoption(records).landed(Landed(review=review(3, task_id=1), fast_forward=True), NOW),
          Others({Get: looping}))
    assert asked == [1, 2]  # each parent asked once; the walk ends after MAX_RETRY_DEPTH steps
    found = records.candidate("cand-a")
    assert found is not None and found.state is CandidateState.APPROVED


def test_a_task_queue_that_does_not_answer_leaves_the_candidate_approved(records: CuratorRecords) -> None:
    records.put(candidate("cand-a", state=CandidateState.APPROVED, task_id=4))
    others = Others(down=("tasks",))
    adoption = Adoption(records)
    drive(adoption.landed(Landed(review=review(3, task_id=9), fast_forward=True), NOW), others)
    drive(adoption.reconcile(NOW), others)
    assert others.said == ["tasks.Get", "tasks.Get"] and others.counted == []
    found = records.candidate("cand-a")
    assert found is not None and found.state is CandidateState.APPROVED


def test_reconciling_at_start_adopts_a_candidate_whose_review_landed_while_the_curator_was_down(
        records: CuratorRecords) -> None:
    records.put(candidate("cand-a", state=CandidateState.APPROVED, task_id=4))
    others = Others({Get: lambda message: Found(task=task(message.task_id, review_id="6")),
                     GetReview: lambda message: ReviewFound(review=review(message.review_id, task_id=4)),
                     ListReviews: lambda _: ReviewList(reviews=(), more=False)})
    drive(Adoption(records).reconcile(NOW), others)
    assert others.said == ["tasks.Get", "reviews.Get", "scanner.SetSignalState"]
    adopted = records.candidate("cand-a")
    assert adopted is not None and (adopted.state, adopted.review_id) == (CandidateState.ADOPTED, "6")
    assert [(e.kind, e.at) for e in records.candidate_events("cand-a")] == [("adopted", NOW)]
