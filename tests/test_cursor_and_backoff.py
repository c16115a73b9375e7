"""The cursor rule (property tests) and the back-off policy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from enact.chat.cursor import ChannelCursor
from enact.retry import Backoff


@st.composite
def interleavings(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Distinct cursors, each received before it is finished, in any order."""
    cursors = draw(st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=40, unique=True))
    steps: list[tuple[str, int]] = []
    received: list[int] = []
    pending = list(cursors)
    while pending or received:
        if pending and (not received or draw(st.booleans())):
            cursor = pending.pop(0)
            received.append(cursor)
            steps.append(("received", cursor))
        else:
            cursor = received.pop(draw(st.integers(min_value=0, max_value=len(received) - 1)))
            steps.append(("finished", cursor))
    return steps


@given(interleavings())
def test_the_acknowledged_cursor_never_passes_an_unfinished_event(steps: list[tuple[str, int]]) -> None:
    rule = ChannelCursor()
    unfinished: set[int] = set()
    acknowledged = 0
    for kind, cursor in steps:
        if kind == "received":
            rule.received(cursor)
            unfinished.add(cursor)
            continue
        target = rule.target(cursor)
        assert rule.finished(cursor) == target  # what the commit wrote is what is acknowledged
        unfinished.discard(cursor)
        assert all(target < other for other in unfinished)
        acknowledged = max(acknowledged, target)
    assert acknowledged == max(cursor for _, cursor in steps)


@given(interleavings())
def test_the_cursor_reaches_the_highest_once_all_are_finished(steps: list[tuple[str, int]]) -> None:
    rule = ChannelCursor()
    last = 0
    for kind, cursor in steps:
        if kind == "received":
            rule.received(cursor)
        else:
            last = rule.finished(cursor)
    assert last == max(cursor for _, cursor in steps)
    assert not rule.unfinished


def test_an_event_finished_without_being_received_still_moves_the_cursor() -> None:
    # An ignored event (outside the conversation lock) is never received.
    rule = ChannelCursor()
    rule.received(5)
    assert rule.finished(3) == 3
    assert rule.finished(7) == 4
    assert rule.finished(5) == 7


def test_backoff_grows_by_its_factor_up_to_its_ceiling() -> None:
    policy = Backoff(first_s=0.5, factor=2.0, max_s=3.0, attempts=5)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert Backoff(first_s=0.1).delay(10_000) == math.inf


def test_backoff_is_exhausted_at_its_last_attempt() -> None:
    policy = Backoff(first_s=0.2, attempts=3)
    assert [policy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]


@pytest.mark.parametrize("fields", [{"first_s": -1}, {"first_s": 1, "factor": 0.5}, {"first_s": 1, "attempts": 0}])
def test_a_nonsense_backoff_is_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="not a back-off policy"):
        Backoff(**fields)  # type: ignore[arg-type]
