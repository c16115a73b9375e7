"""The Scheduler's evolve run and the curator's brainstorm in-process, on a
real home (LMDB, fence): an error from an actor asked, or a failed write,
ends the run or the brainstorm with the error said, instead of escaping the
Scheduler's tick or leaving the asker waiting."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lmdb
import orjson
import pytest

from enact import config
from enact.actors._base import ActorContext
from enact.actors._batching import Deferred
from enact.actors._evolve_brainstorm import BrainstormAnswered, Brainstorms
from enact.actors._evolve_runs import DATABASE, EvolveRuns
from enact.actors._specs import ActorSlot, ActorSpec
from enact.evolution.candidates import Candidate
from enact.evolution.curator_records import CANDIDATES, SETTINGS
from enact.fence import Fence, FencedError
from enact.messages.curator import AuditEvent
from enact.metrics import Metrics
from enact.storage import RecordTable, Storage


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


@contextlib.contextmanager
def home(tmp_path: Path, owner: str, databases: Sequence[str], actors: FaultyActors) -> Iterator[ActorContext]:
    (tmp_path / "config.toml").write_text('[evolve]\nschedule = "every 10s"\n')
    settings = config.load(tmp_path, environ={})
    storage = Storage(tmp_path / "state")
    fence = Fence(tmp_path, storage)
    fence.acquire(takeover=False)
    try:
        store = storage.grant(owner, databases)
        spec = ActorSpec(name=owner, actor=object)  # type: ignore[arg-type]
        yield ActorContext(name=owner, home=tmp_path, config=settings, metrics=Metrics(),
                           supervisor=actors, fence=fence, store=store,  # type: ignore[arg-type]
                           slot=ActorSlot(spec=spec, family=owner))
    finally:
        fence.release()
        storage.close()


def test_an_unexpected_error_in_an_evolve_run_is_acknowledged_as_its_outcome_and_does_not_escape(
        tmp_path: Path) -> None:
    actors = FaultyActors()
    with home(tmp_path, "scheduler", [DATABASE], actors) as context:
        runs = EvolveRuns(context, context.own_store())
        runs.tick(now=1_000.0)  # the anchor: nothing is due yet
        runs.tick(now=1_025.0)
        assert actors.asked == ["curator"]
        clock = runs._current_clock(1_025.0)
        assert clock.claimed is None and clock.acknowledged == 1_020.0
        assert clock.last_outcome == "failed: ValueError: the curator broke"


def test_a_brainstorm_whose_write_fails_fails_its_reply_instead_of_leaving_it_waiting(tmp_path: Path) -> None:
    def fenced_audit(txn: lmdb.Transaction, event: AuditEvent) -> None:
        raise FencedError(1, 2)

    with home(tmp_path, "curator", [CANDIDATES, SETTINGS], FaultyActors()) as context:
        store = context.own_store()
        brainstorms = Brainstorms(context, settings=store.table(SETTINGS),
                                  candidates=RecordTable(store.table(CANDIDATES), Candidate),
                                  audit=fenced_audit, runtime=None, stored=lambda: None)  # type: ignore[arg-type]
        idea = {"evidence_ids": [], "title": "Number the steps", "rationale": "lists read faster",
                "proposed_change": "number multi-step answers", "expected_benefit": "clarity", "risk": "none",
                "test_plan": "a chat test"}
        reply = Deferred()
        brainstorms.answered(BrainstormAnswered(reply=reply, theme="clarity", answer=orjson.dumps([idea]).decode(),
                                                failure=""))
        assert reply.done
        with pytest.raises(FencedError):
            reply.wait(0)


def test_a_model_answer_for_a_run_from_before_a_curator_restart_is_ignored(tmp_path: Path) -> None:
    from enact.actors._curator_proposals import Curated, Run
    from enact.actors.curator import DATABASES as CURATOR_DATABASES
    from enact.actors.curator import CuratorActor

    with home(tmp_path, "curator", CURATOR_DATABASES, FaultyActors()) as context:
        restarted = CuratorActor(context, runtime=None)  # type: ignore[arg-type]  # a new instance, never started
        stale = Run(reply=Deferred(), origin="human-cli")
        restarted.handle(Curated(run=stale, shown=[], records=[], answer="{}", failure=""))
        assert restarted.records.newest_proposals(5) == []  # nothing recorded for the old run
        with pytest.raises(RuntimeError, match="restarted"):
            stale.reply.wait(0)
