"""The Scheduler's evolve run in-process, on a real home (LMDB, fence): an
error of any kind from an actor it asks ends the run, acknowledged with the
error as its outcome, instead of escaping the Scheduler's tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from enact import config
from enact.actors._base import ActorContext
from enact.actors._evolve_runs import DATABASE, EvolveRuns
from enact.actors._specs import ActorSlot, ActorSpec
from enact.fence import Fence
from enact.metrics import Metrics
from enact.storage import Storage


class FaultyActors:
    """The other actors as the run sees them: every ask fails with an error
    that is not ActorUnavailable (a bug in an actor, a bad reply)."""

    stopping = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        self.asked.append(name)
        raise ValueError("the curator broke")

    def tell(self, name: str, message: object) -> None:
        pass


def test_an_unexpected_error_in_an_evolve_run_is_acknowledged_as_its_outcome_and_does_not_escape(
        tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[evolve]\nschedule = "every 10s"\n')
    settings = config.load(tmp_path, environ={})
    storage = Storage(tmp_path / "state")
    fence = Fence(tmp_path, storage)
    fence.acquire(takeover=False)
    try:
        store = storage.grant("scheduler", [DATABASE])
        actors = FaultyActors()
        spec = ActorSpec(name="scheduler", actor=object)  # type: ignore[arg-type]
        context = ActorContext(name="scheduler", home=tmp_path, config=settings, metrics=Metrics(),
                               supervisor=actors, fence=fence, store=store,  # type: ignore[arg-type]
                               slot=ActorSlot(spec=spec, family="scheduler"))
        runs = EvolveRuns(context, store)
        runs.tick(now=1_000.0)  # the anchor: nothing is due yet
        runs.tick(now=1_025.0)
        assert actors.asked == ["curator"]
        clock = runs._current_clock(1_025.0)
        assert clock.claimed is None and clock.acknowledged == 1_020.0
        assert clock.last_outcome == "failed: ValueError: the curator broke"
    finally:
        fence.release()
        storage.close()
