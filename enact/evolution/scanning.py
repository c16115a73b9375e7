"""One scan request, start to end: what is new per source since its
checkpoint, one batch per source (a caller draining every pending batch asks
again while a summary says more is pending: each request stays within one
model call per source), the isolated model call, the all-or-nothing
check of its reply, and the commit (record, signals, markers, checkpoint).

With nothing new the model is not called. A failed scan records why and
leaves the checkpoint where it was, so its records are sent again next time.

A scan is a chain on the scanner's thread: each source's batch is read and,
after its model call (the only step run off the thread, ``OffThread``), its
outcome committed there, then the next source; the report goes to ``done``
at the end, or what went wrong to ``failed``. Nothing but the scanner's
thread writes its tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import Protocol

from enact.actors._long_work import OffThread
from enact.cancellation import CancellationToken
from enact.evolution.scan_batch import EvidenceRecord, experience_records, feedback_records, source_noun
from enact.evolution.scan_prompt import scan_prompt
from enact.evolution.scan_store import CompletedScan, ScanTables
from enact.evolution.scan_validation import InvalidScanReply, parse_observations
from enact.evolution.signals import EvidenceSource, Signal
from enact.frozen_dataclass import dataclass
from enact.messages.inbox import Turns
from enact.messages.scanner import Scan, ScanOutcome, ScanRecord, ScanReport, ScanSummary
from enact.messages.tasks import ChangedTasks
from enact.runtime import RuntimeFailure, RuntimeRequest, RuntimeResult


class EvidenceReader(Protocol):
    """Where the records come from: the Inbox's turn log and the TaskQueue's
    event log, both read by cursor."""

    def turns(self, since: int, limit: int) -> Turns: ...

    def last_turn(self, since: int) -> int:
        """The newest turn's cursor (``since`` when there is none after it)."""
        ...

    def changed_tasks(self, after: int, limit: int) -> ChangedTasks: ...

    def task_running(self) -> bool: ...


class ScanCounter(Protocol):
    def counted(self, source: EvidenceSource, outcome: ScanOutcome) -> None: ...

    def signals_changed(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Batch:
    records: list[EvidenceRecord]
    checkpoint: int
    """Where the source's checkpoint moves once this batch is scanned."""
    markers: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True, kw_only=True)
class _Run:
    """A scan under way: the sources still to scan, what the others came to."""

    sources: list[EvidenceSource]
    scheduled: bool
    done: Callable[[ScanReport], None]
    failed: Callable[[Exception], None]
    summaries: list[ScanSummary] = field(default_factory=list)


def _summary(source: EvidenceSource, outcome: ScanOutcome, *, error: str = "", pending: int = 0) -> ScanSummary:
    return ScanSummary(scan_id="", source=source, outcome=outcome, error=error, records=0, signals=(),
                       pending=pending)


class Scanner:
    def __init__(self, tables: ScanTables, reader: EvidenceReader, invoke: Callable[[RuntimeRequest], RuntimeResult],
                 *, batch: int, timeout_s: float, off_thread: OffThread,
                 counter: ScanCounter | None = None, current: Callable[[], bool] = lambda: True) -> None:
        self.tables = tables
        self._current = current
        """Whether this daemon still owns its home: a fenced one calls no model."""
        self._reader = reader
        self._invoke = invoke
        self._batch = batch
        self._timeout_s = timeout_s
        self._off_thread = off_thread
        self._counter = counter

    def scan(self, message: Scan, *, done: Callable[[ScanReport], None],
             failed: Callable[[Exception], None]) -> None:
        """Scan; ``done(report)`` once every source's outcome is committed,
        or ``failed(error)`` (a defect, an actor that did not answer)."""
        sources = [EvidenceSource(message.source)] if message.source else list(EvidenceSource)
        run = _Run(sources=sources, scheduled=message.scheduled, done=done, failed=failed)

        def start() -> None:
            if message.scheduled and self._reader.task_running():
                run.summaries = [_summary(source, "skipped", error="a task is running; the scan waits until none is")
                                 for source in run.sources]
                run.sources = []
            self._next(run)

        self._step(run, start)

    def _step(self, run: _Run, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as error:
            run.failed(error)

    def _next(self, run: _Run) -> None:
        """Scan the sources left, up to the next model call; report after the last."""
        while run.sources:
            source = run.sources.pop(0)
            found = self._scan_once(source, scheduled=run.scheduled)
            if isinstance(found, _Batch):
                self._call(run, source, found)
                return
            run.summaries.append(found)
        if self._counter is not None:
            for summary in run.summaries:
                self._counter.counted(summary.source, summary.outcome)
        run.done(ScanReport(scans=tuple(run.summaries)))

    def _scan_once(self, source: EvidenceSource, *, scheduled: bool) -> ScanSummary | _Batch:
        checkpoint = self.tables.checkpoint(source)
        if source is EvidenceSource.FEEDBACK:
            new = self._reader.last_turn(checkpoint) - checkpoint
            if new <= 0:
                return _summary(source, "nothing-new")
            if scheduled and new < self._batch:
                return _summary(source, "skipped", pending=new, error=f"only {source_noun(source, new)} new; a "
                                f"scheduled scan waits for a batch of {self._batch}")
            batch = self._feedback_batch(checkpoint)
            if not batch.records:  # the cursor moved without a turn to show for it
                self.tables.advance(source, batch.checkpoint)
                return _summary(source, "nothing-new")
        else:
            found = self._experience_batch(checkpoint)
            if found is None:
                return _summary(source, "nothing-new")
            batch = found
            count = len(batch.markers)  # tasks: a succeeded one brings its experience record too
            if scheduled and count < self._batch:
                return _summary(source, "skipped", pending=count, error=f"only {source_noun(source, count)} new; "
                                f"a scheduled scan waits for a batch of {self._batch}")
        if not self._current():  # checked before each call: a scan of both sources makes two
            return _summary(source, "skipped", pending=len(batch.records),
                            error="this daemon was taken over (fenced); no model was called")
        return batch

    def _feedback_batch(self, checkpoint: int) -> _Batch:
        page = self._reader.turns(checkpoint, self._batch)
        return _Batch(records=feedback_records(page.turns), checkpoint=page.next_cursor)

    def _experience_batch(self, checkpoint: int) -> _Batch | None:
        """The next page with a task to scan; pages of tasks still under way,
        or already scanned at their latest event, only move the checkpoint."""
        while True:
            page = self._reader.changed_tasks(checkpoint, self._batch)
            if not page.tasks:
                return None
            found = experience_records(page.tasks, self.tables.markers(s.task.id for s in page.tasks))
            if found.records:
                return _Batch(records=found.records, checkpoint=page.next_cursor, markers=found.markers)
            self.tables.advance(EvidenceSource.EXPERIENCE, page.next_cursor)
            checkpoint = page.next_cursor
            if not page.more:
                return None

    def _pending(self, source: EvidenceSource) -> int:
        """Records still waiting: every new turn; up to a batch of tasks."""
        checkpoint = self.tables.checkpoint(source)
        if source is EvidenceSource.FEEDBACK:
            return max(0, self._reader.last_turn(checkpoint) - checkpoint)
        found = self._experience_batch(checkpoint)
        return 0 if found is None else len(found.markers)

    def _call(self, run: _Run, source: EvidenceSource, batch: _Batch) -> None:
        """The model call, off the scanner's thread; its outcome committed on it."""
        started = time.time()
        prompt = scan_prompt(source, batch.records)

        def call(cancel: CancellationToken) -> tuple[str, str]:
            request = RuntimeRequest(session_key="", prompt=prompt, sandbox="read-only", purpose="scan",
                                     timeout_s=self._timeout_s, cancel=cancel)
            try:
                return self._invoke(request).text, ""
            except RuntimeFailure as failure:
                return "", f"the model call failed ({failure.kind}): {failure}"

        def answered(outcome: tuple[str, str]) -> None:
            run.summaries.append(self._commit(source, batch, started, *outcome))
            self._next(run)

        self._off_thread(call, then=lambda outcome: self._step(run, lambda: answered(outcome)), failed=run.failed)

    def _commit(self, source: EvidenceSource, batch: _Batch, started: float, answer: str,
                error: str) -> ScanSummary:
        refs = tuple(record.ref for record in batch.records)
        signals: tuple[Signal, ...] = ()
        if not error:
            try:
                signals = parse_observations(answer, source=source, known_refs=set(refs), scan_id="",
                                             now=time.time())
            except InvalidScanReply as invalid:
                error = f"the reply was refused: {invalid}"
        finished = time.time()
        record = ScanRecord(id="", source=source, outcome="failed" if error else "completed", error=error,
                            records=len(refs), refs=refs, signals=tuple(signal.id for signal in signals),
                            started_at=started, finished_at=finished)
        completed = None if error else CompletedScan(signals=signals, checkpoint=batch.checkpoint,
                                                     markers=batch.markers)
        stored = self.tables.record(record, completed)
        if completed is not None and signals and self._counter is not None:
            self._counter.signals_changed()
        return ScanSummary(scan_id=stored.id, source=source, outcome=stored.outcome, error=error, records=len(refs),
                           signals=stored.signals, pending=self._pending(source))
