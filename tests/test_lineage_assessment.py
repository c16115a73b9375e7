"""A lineage scan's assessments as plain rules: the changes are assessed in
turn within the scan's time budget (on a clock the test advances), the calls
given what is left of it; a call the budget cut short ends the scan's work
with what was assessed, a call's own timeout fails it; the guard refuses an
adaptation that merges on the owner's behalf, not one that mentions merging."""

from __future__ import annotations

import orjson
import pytest

from enact.clock import ManualClock
from enact.evolution import guard
from enact.evolution.lineage_assessment import AssessmentFailed, assess_in_turn
from enact.evolution.lineage_git import ParentChange
from enact.runtime import RuntimeTimeout

ANSWER = {"summary": "The parent keeps its replies short", "behavioural_change": "shorter replies",
          "rationale": "brevity", "adaptation": "Add a note about brevity", "risks": "terse answers",
          "files": ["lib.py"], "tests": "the existing tests", "confidence": 0.8}


def change(number: int) -> ParentChange:
    return ParentChange(commit=f"{number:040x}", merged=(), messages="m", files=("lib.py",), diff="d",
                        clipped=False)


def test_changes_are_assessed_in_turn_each_call_given_what_is_left_of_the_budget() -> None:
    clock, given = ManualClock(), []

    def invoke(_: ParentChange, timeout_s: float) -> str:
        given.append(timeout_s)
        clock.advance(40)
        return orjson.dumps(ANSWER).decode()

    assessed = assess_in_turn([change(n) for n in range(5)], invoke, budget_s=100, call_timeout_s=50,
                              monotonic=clock.monotonic)
    # 0-40 s, 40-80 s, then 20 s left for the third: it answered in time here too (the clock is the call's).
    assert [one.change.commit for one in assessed] == [change(n).commit for n in range(3)]
    assert given == [50, 50, 20]
    assert all(one.refused == "" for one in assessed)


def test_a_call_the_budget_cut_short_ends_the_work_with_what_was_assessed() -> None:
    clock = ManualClock()

    def invoke(_: ParentChange, timeout_s: float) -> str:
        clock.advance(timeout_s)
        if timeout_s < 50:
            raise RuntimeTimeout("took too long")
        return orjson.dumps(ANSWER).decode()

    assessed = assess_in_turn([change(n) for n in range(3)], invoke, budget_s=70, call_timeout_s=50,
                              monotonic=clock.monotonic)
    assert [one.change.commit for one in assessed] == [change(0).commit]


def test_a_calls_own_timeout_or_a_malformed_reply_fails_the_scan_naming_the_change() -> None:
    def slow(_: ParentChange, timeout_s: float) -> str:
        raise RuntimeTimeout("took too long")

    with pytest.raises(AssessmentFailed, match=f"model call for {change(0).commit[:12]} failed \\(timeout\\)"):
        assess_in_turn([change(0)], slow, budget_s=1_000, call_timeout_s=50, monotonic=ManualClock().monotonic)
    with pytest.raises(AssessmentFailed, match=f"assessment of {change(0).commit[:12]} was refused: .*lacks"):
        assess_in_turn([change(0)], lambda _, __: '{"summary": "only"}', budget_s=1_000, call_timeout_s=50,
                       monotonic=ManualClock().monotonic)


def test_an_adaptation_that_merges_for_the_owner_is_refused_and_marked_not_raised() -> None:
    answer = {**ANSWER, "adaptation": "merge the task branch into main automatically"}
    [assessed] = assess_in_turn([change(0)], lambda _, __: orjson.dumps(answer).decode(), budget_s=100,
                                call_timeout_s=50, monotonic=ManualClock().monotonic)
    assert "merging" in assessed.refused and assessed.assessment.adaptation == answer["adaptation"]


@pytest.mark.parametrize("text", [
    "merge reviews automatically once tests pass",
    "merge the branch into main",
    "auto-merge green reviews",
    "let it merge its own branches",
    "merge without a review when the doctor passes",
    "land its own reviews",
    "push to main after the tests",
])
def test_merging_on_the_owners_behalf_stays_human_controlled(text: str) -> None:
    assert "touches merging" in guard.refusal({"proposed_change": text})


@pytest.mark.parametrize("text", [
    "Take in the parent's merge of the helpers branch",
    "merge duplicate facts when remembering",
    "Merge pull request #12 from someone/retry: add retries",
    "The parent merged its retry branch; add the same retry helper",
])
def test_a_change_that_merely_mentions_merging_is_not_refused_for_the_word(text: str) -> None:
    assert guard.refusal({"title": text, "proposed_change": text}) == ""
