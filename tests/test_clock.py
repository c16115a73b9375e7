"""The clock actors read time by: the manual one moves only when a test
advances it, runs its timers in due order at their due time, and drives an
actor's ``tell_later`` through a real supervisor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from enact.actors._base import EnactActor
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.clock import REAL_CLOCK, ManualClock
from enact.config import load
from enact.fence import Fence
from enact.messages import Request
from enact.metrics import Metrics
from enact.storage import Storage


def test_manual_time_stands_still_until_advanced() -> None:
    clock = ManualClock(start=1_000.0)
    assert (clock.time(), clock.monotonic()) == (1_000.0, 0.0)
    clock.advance(2.5)
    assert (clock.time(), clock.monotonic()) == (1_002.5, 2.5)


def test_timers_run_in_due_order_at_their_due_time_and_a_cancelled_one_never() -> None:
    clock = ManualClock(start=0.0)
    ran: list[tuple[str, float]] = []
    clock.call_later(3, lambda: ran.append(("late", clock.time())))
    clock.call_later(1, lambda: ran.append(("early", clock.time())))
    clock.call_later(2, lambda: ran.append(("cancelled", clock.time()))).cancel()
    clock.advance(1.5)
    assert ran == [("early", 1.0)]
    clock.advance(10)
    assert ran == [("early", 1.0), ("late", 3.0)] and clock.time() == 11.5


def test_the_real_clock_is_the_machines() -> None:
    import time

    assert abs(REAL_CLOCK.time() - time.time()) < 1 and abs(REAL_CLOCK.monotonic() - time.monotonic()) < 1


class Count(Request[int]):
    pass


class Ticking(EnactActor):
    """Counts a tick a second, by its own timer."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.ticks = 0

    def on_start(self) -> None:
        self.tell_later(1.0, "tick")

    def handle(self, message: Any) -> Any:
        if message == "tick":
            self.ticks += 1
            self.tell_later(1.0, "tick")
            return None
        if isinstance(message, Count):
            return self.ticks
        return super().handle(message)


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[tuple[Supervisor, ManualClock]]:
    storage = Storage(tmp_path / "state", map_size=1 << 20)
    fence = Fence(tmp_path, storage)
    fence.acquire(takeover=False)
    clock = ManualClock()
    supervisor = Supervisor([ActorSpec(name="ticking", actor=Ticking)], home=tmp_path,
                            config=load(tmp_path, environ={}), metrics=Metrics(), storage=storage, fence=fence,
                            on_fatal=lambda why: None, clock=clock)
    supervisor.start()
    try:
        yield supervisor, clock
    finally:
        supervisor.stop(5)
        fence.release()
        storage.close()


def test_an_actors_timer_fires_when_its_clock_is_advanced_not_before(
        supervised: tuple[Supervisor, ManualClock]) -> None:
    supervisor, clock = supervised
    assert supervisor.ask("ticking", Count(), timeout=5) == 0
    clock.advance(0.9)
    assert supervisor.ask("ticking", Count(), timeout=5) == 0
    for expected in (1, 2, 3):
        clock.advance(1)  # each tick re-arms its timer before the ask after it is answered
        assert supervisor.ask("ticking", Count(), timeout=5) == expected
