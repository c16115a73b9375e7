"""Counts in output agree with their nouns (enact.wording)."""

from __future__ import annotations

from enact.tasks.records import TaskState
from enact.wording import counted


def test_a_count_takes_the_singular_only_for_one() -> None:
    assert [counted(n, "call") for n in (0, 1, 2)] == ["0 calls", "1 call", "2 calls"]
    assert [counted(n, "reply", "replies") for n in (1, 3)] == ["1 reply", "3 replies"]


def test_a_task_state_reads_as_a_sentence_after_the_task() -> None:
    told = {state: f"task 5 {state.as_told}" for state in TaskState}
    assert told[TaskState.SUCCEEDED] == "task 5 succeeded" and told[TaskState.FAILED] == "task 5 failed"
    assert told[TaskState.CANCELLED] == "task 5 was cancelled" and told[TaskState.QUEUED] == "task 5 is queued"
