"""The Scheduler's evolve run and the curator's brainstorm in-process, on a
real home (LMDB, fence): an error from an actor asked, or a failed write,
ends the run or the brainstorm with the error said, instead of escaping the
Scheduler's tick or leaving the asker waiting."""

from __future__ import annotations

from pathlib import Path

import lmdb
import orjson
import pytest
from schedule_clock import FaultyActors, home

from enact.actors._batching import Deferred
from enact.actors._long_work import run_inline
from enact.evolution.brainstorms import BrainstormAnswered, Brainstorms
from enact.evolution.candidates import Candidate
from enact.evolution.curator_records import CANDIDATES, SETTINGS
from enact.evolution.runs import DATABASE, EvolveRuns
from enact.fence import FencedError
from enact.messages.curator import AuditEvent
from enact.storage import RecordTable


def test_an_unexpected_error_in_an_evolve_run_is_acknowledged_as_its_outcome_and_does_not_escape(
        tmp_path: Path) -> None:
    actors = FaultyActors()
    with home(tmp_path, "scheduler", [DATABASE], actors) as context:
        runs = EvolveRuns(context, context.own_store())
        runs.tick(now=1_000.0)  # the anchor: nothing is due yet
        runs.tick(now=1_025.0)
        assert actors.asked == ["curator"]
        clock = runs._current_clock(1_025.0)
        assert clock.claim.claimed is None and clock.acknowledged == 1_020.0
        assert clock.last_outcome == "failed: ValueError: the curator broke"


def test_a_brainstorm_whose_write_fails_fails_its_reply_instead_of_leaving_it_waiting(tmp_path: Path) -> None:
    def fenced_audit(txn: lmdb.Transaction, event: AuditEvent) -> None:
        raise FencedError(1, 2)

    with home(tmp_path, "curator", [CANDIDATES, SETTINGS], FaultyActors()) as context:
        store = context.own_store()
        brainstorms = Brainstorms(context, settings=store.table(SETTINGS),
                                  candidates=RecordTable(store.table(CANDIDATES), Candidate),
                                  audit=fenced_audit, runtime=None,  # type: ignore[arg-type]
                                  off_thread=run_inline, stored=lambda: None)
        idea = {"evidence_ids": [], "title": "Number the steps", "rationale": "lists read faster",
                "proposed_change": "number multi-step answers", "expected_benefit": "clarity", "risk": "none",
                "test_plan": "a chat test"}
        reply = Deferred()
        brainstorms.answered(BrainstormAnswered(reply=reply, theme="clarity", answer=orjson.dumps([idea]).decode(),
                                                failure=""))
        assert reply.done
        with pytest.raises(FencedError):
            reply.wait(0)

