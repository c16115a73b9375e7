"""The evolve run and the curator's brainstorm in-process, on a real home
(LMDB, fence), their asks run inline: an error from an actor asked, or a
failed write, ends the run or the brainstorm with the error said, instead of
escaping the evolve actor's tick or leaving the asker waiting; a run goes on
one step per reply, and a tick while it waits starts no other; the clock
shown is the one the run keeps; the lineage step is waited for by its own
timeout, and one that does not answer is reported while the run goes on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import orjson
import pytest
from schedule_clock import FaultyActors, home

from enact.actors._asks import AskTimeout
from enact.actors._batching import Deferred
from enact.actors._long_work import run_inline
from enact.cancellation import CancellationToken
from enact.config import DaemonSettings
from enact.evolution.brainstorms import BrainstormAnswered, Brainstorms
from enact.evolution.candidates import Candidate
from enact.evolution.curator_records import CANDIDATES, SETTINGS
from enact.evolution.modes import EvolveMode
from enact.evolution.runs import DATABASE, EvolveRuns
from enact.evolution.settings import LineageSettings
from enact.fence import FencedError
from enact.messages.curator import AuditEvent, CandidateList, Candidates, EvolveHistory, GetMode, History, ModeShown
from enact.messages.evolve import ClockShown
from enact.messages.lineage import LineageScanned
from enact.messages.lineage import Scan as LineageScan
from enact.messages.scanner import Scan, ScanReport
from enact.storage import RecordTable


def test_an_unexpected_error_in_an_evolve_run_is_acknowledged_as_its_outcome_and_does_not_escape(
        tmp_path: Path) -> None:
    actors = FaultyActors()
    with home(tmp_path, "evolve", [DATABASE], actors) as context:
        runs = EvolveRuns(context, context.own_store(), off_thread=run_inline)
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
        brainstorms = Brainstorms(store, settings=store.table(SETTINGS),
                                  candidates=RecordTable(store.table(CANDIDATES), Candidate),
                                  audit=fenced_audit, is_current=context.fence.is_current)
        idea = {"evidence_ids": [], "title": "Number the steps", "rationale": "lists read faster",
                "proposed_change": "number multi-step answers", "expected_benefit": "clarity", "risk": "none",
                "test_plan": "a chat test"}
        reply = Deferred()
        effects = list(brainstorms.answered(BrainstormAnswered(
            reply=reply, theme="clarity", answer=orjson.dumps([idea]).decode(), failure=""), now=1_000.0))
        assert effects == []  # nothing stored: nothing to count
        assert reply.done
        with pytest.raises(FencedError):
            reply.wait(0)



class QuietHome(FaultyActors):
    """Actors with nothing to report: co-evolve, no new records, no candidates."""

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        self.asked.append(f"{name}.{type(message).__name__}")
        match message:
            case GetMode():
                return ModeShown(mode=EvolveMode.CO_EVOLVE, stored=False)
            case Scan():
                return ScanReport(scans=())
            case LineageScan():
                return LineageScanned(outcome="nothing-new")
            case Candidates():
                return CandidateList(candidates=())
            case History():
                return EvolveHistory(events=())
        raise AssertionError(f"not asked in a quiet run: {message!r}")


def test_a_run_goes_on_one_step_per_reply_and_a_tick_meanwhile_starts_no_other(tmp_path: Path) -> None:
    waiting: list[Callable[[], None]] = []

    def later(work: Callable[[CancellationToken], Any], *, then: Callable[[Any], object],
              failed: Callable[[Exception], object] | None = None) -> None:
        waiting.append(lambda: run_inline(work, then=then, failed=failed))

    actors = QuietHome()
    with home(tmp_path, "evolve", [DATABASE], actors) as context:
        runs = EvolveRuns(context, context.own_store(), off_thread=later)
        runs.tick(now=1_000.0)  # the anchor: nothing is due yet
        runs.tick(now=1_025.0)
        assert runs.running and runs._current_clock(1_025.0).claim.claimed == 1_020.0  # claimed before it asks
        runs.tick(now=1_026.0)  # the run waits for its first reply: no second one
        assert len(waiting) == 1 and actors.asked == []
        steps = 0
        while waiting:
            waiting.pop(0)()
            steps += 1
        assert steps == 5 and actors.asked == ["curator.GetMode", "scanner.Scan", "lineage.Scan",
                                               "curator.Candidates", "curator.History"]
        clock = runs._current_clock(1_030.0)
        assert not runs.running and clock.claim.claimed is None and clock.acknowledged == 1_020.0
        assert clock.last_outcome == "co-evolve: nothing new, no model called"


def test_the_clock_shown_is_the_one_the_run_keeps_from_the_first_tick_to_the_last_run(tmp_path: Path) -> None:
    with home(tmp_path, "evolve", [DATABASE], QuietHome()) as context:
        runs = EvolveRuns(context, context.own_store(), off_thread=run_inline)
        assert runs.shown(1_000.0) == ClockShown(schedule="every 10s", next_due_at=None, last_run_at=None)
        runs.tick(now=1_000.0)  # the anchor
        assert runs.shown(1_001.0) == ClockShown(schedule="every 10s", next_due_at=1_010.0, last_run_at=None)
        assert runs.shown(1_015.0).next_due_at == 1_015.0  # due already: at once
        runs.tick(now=1_015.0)
        ran = runs.shown(1_016.0)
        assert (ran.next_due_at, ran.last_outcome) == (1_020.0, "co-evolve: nothing new, no model called")
        assert ran.last_run_at is not None  # the context's clock: the wall clock here


def test_a_run_reports_a_rewritten_parent_once_and_a_quiet_lineage_not_at_all() -> None:
    from enact.evolution.runs import lineage_line

    rewritten = LineageScanned(outcome="rewritten", error="the parent's history was rewritten: …")
    assert lineage_line(rewritten) == "lineage scan rewritten: the parent's history was rewritten: …"
    assert lineage_line(LineageScanned(outcome="rewritten", error="…", first_report=False)) == ""
    assert lineage_line(LineageScanned(outcome="nothing-new")) == ""
    assert lineage_line(LineageScanned(outcome="not-configured")) == ""
    assert lineage_line(LineageScanned(outcome="assessed", entries=("lin-1", "lin-2"), remaining=3)) == \
        "lineage: 2 parent changes assessed (3 more next run)"


class SlowLineage(QuietHome):
    """A quiet home whose lineage scan outlasts the run's wait for it."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: dict[str, float] = {}

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        if isinstance(message, LineageScan):
            self.asked.append("lineage.Scan")
            self.timeouts["lineage"] = timeout
            raise AskTimeout(name, message, timeout)
        return super().ask(name, message, timeout=timeout)


def test_a_lineage_scan_is_waited_for_by_its_own_timeout_and_one_that_does_not_answer_ends_no_run(
        tmp_path: Path) -> None:
    actors = SlowLineage()
    with home(tmp_path, "evolve", [DATABASE], actors) as context:
        runs = EvolveRuns(context, context.own_store(), off_thread=run_inline)
        runs.tick(now=1_000.0)
        runs.tick(now=1_025.0)
        lineage = context.config.typed(LineageSettings).scan_timeout_s
        assert actors.timeouts["lineage"] == lineage + context.config.typed(DaemonSettings).request_timeout_s
        # The rest of the run went on: the proposal check after the lineage step ran, and the run ended.
        assert actors.asked == ["curator.GetMode", "scanner.Scan", "lineage.Scan", "curator.Candidates",
                                "curator.History"]
        clock = runs._current_clock(1_030.0)
        assert not runs.running and clock.claim.claimed is None and clock.acknowledged == 1_020.0
        assert clock.last_outcome.startswith("lineage scan did not answer: actor 'lineage' did not answer Scan "
                                             f"within {lineage + 120:g} s"), clock.last_outcome
