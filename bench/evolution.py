"""The cost of one feedback scan over a batch of new turns, with 10k and
100k turns of history already scanned, beside the original agent's way
measured in the same run.

enact: the EvidenceScanner's own code (``enact.evolution.scanning``) over a
real LMDB turn log read as the Inbox reads it (``inbox.ReadTurns`` by
cursor from the checkpoint), the scan's record, signals and checkpoint in
one durable commit. Baseline, the original's way: every scan re-reads the
whole turn log (JSON lines) and every completed scan record (JSON lines, each
with its input refs) to find the turns not yet processed, then appends its
record. Both build the same redacted batch, prompt and check of the reply;
the model is an in-process scripted answer, so only the scan's own cost is
timed.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import lmdb
import orjson

from bench._table import Table, median, ratio
from enact.actors._long_work import run_inline
from enact.chat.inbox_records import TURNS, TurnLog
from enact.chat.turns import read_turns
from enact.evolution.scan_batch import feedback_records
from enact.evolution.scan_prompt import scan_prompt
from enact.evolution.scan_store import DATABASES, CompletedScan, ScanTables
from enact.evolution.scan_validation import parse_observations
from enact.evolution.scanning import Scanner
from enact.evolution.signals import EvidenceSource, turn_ref
from enact.messages.inbox import ReadTurns, Turn, Turns
from enact.messages.scanner import Scan, ScanRecord, ScanReport
from enact.messages.tasks import ChangedTasks
from enact.runtime import RuntimeRequest, RuntimeResult
from enact.storage import Storage, Store

TITLE = "11. Evidence scan: one feedback batch with 10k and 100k turns of history already scanned"
BATCH = 20


def _turn(n: int) -> Turn:
    return Turn(cursor=n, event_id=f"e{n}", channel="local", conversation="cli", message_id=f"m{n}",
                message=f"turn {n}: the reply to my question about the build was too long again",
                reply="(scripted runtime) Here is a long answer about the build and its tests.",
                time=1_700_000_000.0 + n, outcome="replied", attempts=1, actions=())


def _answer(request: RuntimeRequest) -> RuntimeResult:
    """The scripted model: one observation citing the batch's last turn."""
    last_ref = request.prompt.rsplit('"ref":"', 1)[1].split('"', 1)[0]
    return RuntimeResult(text=orjson.dumps([{
        "observation": f"replies are too long ({last_ref})", "evidence_type": "complaint",
        "affected_area": "replies", "desired_outcome": "short replies", "confidence": 0.8, "explicit": True,
        "evidence_refs": [last_ref]}]).decode())


class _LogReader:
    def __init__(self, store: Store, turns: TurnLog) -> None:
        self._store, self._turns = store, turns

    def turns(self, since: int, limit: int) -> Turns:
        return self._store.read(lambda txn: read_turns(txn, self._turns, ReadTurns(since=since, limit=limit)))

    def last_turn(self, since: int) -> int:
        return self._store.read(lambda txn: read_turns(txn, self._turns, ReadTurns(since=since, last=1)).next_cursor)

    def changed_tasks(self, after: int, limit: int) -> ChangedTasks:
        return ChangedTasks(tasks=(), next_cursor=after, more=False)

    def task_running(self) -> bool:
        return False


class _Enact:
    def __init__(self, directory: Path, history: int) -> None:
        self.storage = Storage(directory, map_size=1 << 30)
        store = self.storage.grant("scanner", (*DATABASES, TURNS))
        self.store = store
        self.turns = TurnLog(store.log(TURNS))
        self.tables = ScanTables(store)
        self.append(range(1, history + 1))
        # The history was scanned: the checkpoint stands at its last turn.
        self.tables.record(ScanRecord(id="", source=EvidenceSource.FEEDBACK, outcome="completed", error="",
                                      records=history, refs=(), signals=(), started_at=0, finished_at=0),
                           CompletedScan(signals=(), checkpoint=history))
        # Driven inline: the scan's model call is timed where it is made, without a thread.
        self.scanner = Scanner(self.tables, _LogReader(store, self.turns), _answer, batch=BATCH, timeout_s=5,
                               off_thread=run_inline)

    def append(self, numbers: range) -> None:
        def write(txn: lmdb.Transaction) -> None:
            for n in numbers:
                self.turns.append(txn, _turn(n))

        self.store.write(write)

    def scan(self) -> int:
        reports: list[ScanReport] = []

        def failed(error: Exception) -> None:
            raise error

        self.scanner.scan(Scan(source="feedback"), done=reports.append, failed=failed)
        [(summary,)] = [report.scans for report in reports]
        if summary.outcome != "completed":
            raise RuntimeError(f"the enact scan did not complete: {summary.error}")
        return summary.records

    def close(self) -> None:
        self.storage.close()


class _Baseline:
    """The original's files: the turn log and the scan records, JSON lines."""

    def __init__(self, directory: Path, history: int) -> None:
        directory.mkdir()
        self.turn_log = directory / "turns.jsonl"
        self.scan_log = directory / "evidence_scans.jsonl"
        self.append(range(1, history + 1))
        with open(self.scan_log, "wb") as file:  # the history's scans, a batch each
            for first in range(1, history + 1, BATCH):
                refs = [turn_ref(n) for n in range(first, min(first + BATCH, history + 1))]
                file.write(orjson.dumps({"id": f"scan-{first}", "source": "feedback", "status": "completed",
                                         "input_refs": refs, "evidence_ids": []}) + b"\n")

    def append(self, numbers: range) -> None:
        with open(self.turn_log, "ab") as file:
            for n in numbers:
                file.write(orjson.dumps(_turn(n)) + b"\n")

    def scan(self) -> int:
        processed: set[str] = set()
        for line in self.scan_log.read_bytes().splitlines():
            record: dict[str, Any] = orjson.loads(line)
            if record["status"] == "completed":
                processed.update(record["input_refs"])
        pending = []
        for line in self.turn_log.read_bytes().splitlines():
            turn = Turn(**orjson.loads(line))
            if turn_ref(turn.cursor) not in processed:
                pending.append(turn)
        batch = feedback_records(pending[:BATCH])
        prompt = scan_prompt(EvidenceSource.FEEDBACK, batch)
        answer = _answer(RuntimeRequest(session_key="", prompt=prompt, purpose="scan")).text
        signals = parse_observations(answer, source=EvidenceSource.FEEDBACK, known_refs={r.ref for r in batch},
                                     scan_id="", now=time.time())
        with open(self.scan_log, "ab") as file:
            file.write(orjson.dumps({"id": f"scan-{time.monotonic_ns()}", "source": "feedback",
                                     "status": "completed", "input_refs": [r.ref for r in batch],
                                     "evidence_ids": [s.id for s in signals]}) + b"\n")
        return len(batch)


def _timed_scans(side: _Enact | _Baseline, history: int, scans: int) -> list[float]:
    samples = []
    for round_ in range(scans):
        first = history + round_ * BATCH + 1
        side.append(range(first, first + BATCH))  # new turns arrive (untimed)
        started = time.perf_counter()
        records = side.scan()
        samples.append(time.perf_counter() - started)
        if records != BATCH:
            raise RuntimeError(f"a scan sent {records} turns, not the {BATCH} new ones")
    return samples


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


def run(quick: bool) -> Table:
    histories = [1_000, 5_000] if quick else [10_000, 100_000]
    scans = 3 if quick else 15
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    table = Table(TITLE, ["turns scanned before", "enact ms/scan", "re-read baseline ms/scan", "baseline ÷ enact"])
    try:
        for history in histories:
            enact = _Enact(directory / f"enact-{history}", history)
            try:
                ours = median(_timed_scans(enact, history, scans))
            finally:
                enact.close()
            theirs = median(_timed_scans(_Baseline(directory / f"jsonl-{history}", history), history, scans))
            table.add(f"{history:,}", _ms(ours), _ms(theirs), ratio(theirs / ours))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    table.note(f"median of {scans} scans, each over {BATCH} new turns appended just before it (untimed); the "
               "model call is an in-process scripted answer")
    table.note("enact: read the new turns by cursor from the checkpoint, redact, prompt, check, and one durable "
               "LMDB commit (record, signal, checkpoint); baseline: parse every turn and every scan record to find "
               "what is pending, the same redaction, prompt and check, then append its record without fsync")
    return table
