"""The scanner's databases, their keys, and what a scan commits.

- ``evolution.signals``: signal id → ``Signal``.
- ``evolution.signal_order``: the signals in the order they were made,
  ``<scope> 0x00 <created_at µs, 8 bytes big-endian> <signal id>`` → empty,
  scope ``*`` (every signal) and the signal's state (kept as it moves), so
  a page of signals is read without reading them all; ``0xff`` marks an
  order that holds every signal stored before it existed.
- ``evolution.scans``: an append log of ``ScanRecord`` (scan id ``scan-<sequence>``).
- ``evolution.checkpoints``: ``c<source>`` → ``Checkpoint`` (the cursor up
  to which that source is scanned); ``m<task id>`` (8 bytes, big-endian) →
  ``TaskMarker`` (the latest event of that task a completed scan processed).

A completed scan's record, signals, markers and checkpoint commit in one
transaction: after a crash either all of it is there or none of it.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import time
from collections.abc import Iterable

import lmdb

from enact.evolution.signals import EvidenceSource, Signal, SignalState
from enact.frozen_dataclass import dataclass
from enact.messages.scanner import ScanRecord
from enact.storage import AppendLog, RecordTable, Store

SIGNALS = "evolution.signals"
SCANS = "evolution.scans"
CHECKPOINTS = "evolution.checkpoints"
SIGNAL_ORDER = "evolution.signal_order"
DATABASES = (SIGNALS, SCANS, CHECKPOINTS, SIGNAL_ORDER)

_TASK = struct.Struct(">Q")
_MICROS = struct.Struct(">Q")
_EVERY = b"*"
_ORDERED = b"\xff"
_SETTLED = frozenset({SignalState.DISMISSED, SignalState.RESOLVED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    source: EvidenceSource
    cursor: int
    """Inbox turn cursor (feedback) or task event sequence (experience)."""
    scan_id: str
    updated_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskMarker:
    task_id: int
    sequence: int
    scan_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedScan:
    """What a completed scan commits besides its record."""

    signals: tuple[Signal, ...]
    checkpoint: int
    markers: tuple[tuple[int, int], ...] = ()
    """(task id, latest event sequence processed), experience scans only."""


def _checkpoint_key(source: EvidenceSource) -> bytes:
    return b"c" + source.value.encode()


def _marker_key(task_id: int) -> bytes:
    return b"m" + _TASK.pack(task_id)


def _order_key(scope: bytes, signal: Signal) -> bytes:
    return scope + b"\x00" + _MICROS.pack(max(0, round(signal.created_at * 1_000_000))) + signal.id.encode()


def _state_scope(state: SignalState) -> bytes:
    return state.value.encode()


def scan_id_of(sequence: int) -> str:
    return f"scan-{sequence}"


class ScanTables:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._signals = RecordTable(store.table(SIGNALS), Signal)
        self._log = store.log(SCANS)
        self._scans = RecordTable(self._log, ScanRecord)
        checkpoints = store.table(CHECKPOINTS)
        self._checkpoints = RecordTable(checkpoints, Checkpoint)
        self._markers = RecordTable(checkpoints, TaskMarker)
        self._order = store.handle(SIGNAL_ORDER)
        # Signals by state, counted once here and kept by each write after it
        # commits (writes come from the scan thread and the actor's).
        self._counts_lock = threading.Lock()
        self._counts = dict.fromkeys(SignalState, 0)
        for state in store.read(lambda txn: [signal.state for _, signal in self._signals.items(txn)]):
            self._counts[state] += 1

    # -- reads ----------------------------------------------------------------

    def checkpoint(self, source: EvidenceSource) -> int:
        found = self.store.read(lambda txn: self._checkpoints.get(txn, _checkpoint_key(source)))
        return 0 if found is None else found.cursor

    def marker(self, txn: lmdb.Transaction, task_id: int) -> int:
        found = self._markers.get(txn, _marker_key(task_id))
        return 0 if found is None else found.sequence

    def markers(self, task_ids: Iterable[int]) -> dict[int, int]:
        return self.store.read(lambda txn: {task_id: self.marker(txn, task_id) for task_id in task_ids})

    def signals(self, state: SignalState | None, limit: int, *, oldest_first: bool = False) -> list[Signal]:
        """Newest first, or the oldest first: a page read in the signals'
        order (by every signal until that order is built)."""

        def read(txn: lmdb.Transaction) -> list[Signal]:
            if txn.get(_ORDERED, db=self._order) is None:  # a home from before the order, not built yet
                return self._sorted_page(txn, state, limit, oldest_first)
            found = (self._signals.get(txn, signal_id)
                     for signal_id in self._ordered_ids(txn, _EVERY if state is None else _state_scope(state),
                                                        limit, oldest_first))
            return [signal for signal in found if signal is not None]

        return self.store.read(read)

    def _ordered_ids(self, txn: lmdb.Transaction, scope: bytes, limit: int, oldest_first: bool) -> list[bytes]:
        prefix = scope + b"\x00"
        position = txn.cursor(db=self._order)
        if oldest_first:
            if not position.set_range(prefix):
                return []
            keys = position.iternext(values=False)
        else:  # from the last key of this scope backwards
            placed = position.prev() if position.set_range(scope + b"\x01") else position.last()
            if not placed:
                return []
            keys = position.iterprev(values=False)
        found: list[bytes] = []
        for raw in keys:
            key = bytes(raw)
            if len(found) >= limit or not key.startswith(prefix):
                break
            found.append(key[len(prefix) + _MICROS.size:])
        return found

    def _sorted_page(self, txn: lmdb.Transaction, state: SignalState | None, limit: int,
                     oldest_first: bool) -> list[Signal]:
        found = [signal for _, signal in self._signals.items(txn) if state is None or signal.state is state]
        found.sort(key=lambda signal: (signal.created_at, signal.id), reverse=not oldest_first)
        return found[:limit]

    def count(self, state: SignalState | None) -> int:
        """Signals in ``state`` (None: all) as of the last commit."""
        counts = self.counts()
        return sum(counts.values()) if state is None else counts[state]

    def signals_by_id(self, signal_ids: Iterable[str]) -> list[Signal]:
        """The known signals of ``signal_ids``, in that order, each once."""

        def read(txn: lmdb.Transaction) -> list[Signal]:
            found = (self._signals.get(txn, signal_id.encode()) for signal_id in dict.fromkeys(signal_ids))
            return [signal for signal in found if signal is not None]

        return self.store.read(read)

    def counts(self) -> dict[SignalState, int]:
        with self._counts_lock:
            return dict(self._counts)

    def _counted(self, changes: Iterable[tuple[SignalState | None, SignalState]]) -> None:
        """Committed state changes (None: a new signal) into the counts."""
        with self._counts_lock:
            for before, after in changes:
                if before is not None:
                    self._counts[before] -= 1
                self._counts[after] += 1

    def history(self, limit: int) -> list[ScanRecord]:
        def read(txn: lmdb.Transaction) -> list[ScanRecord]:
            found: list[ScanRecord] = []
            for sequence, _ in self._log.iterate_backwards(txn):
                if len(found) >= limit:
                    break
                record = self._scans.get(txn, AppendLog.key(sequence))
                if record is not None:
                    found.append(record)
            return found

        return self.store.read(read)

    # -- writes ---------------------------------------------------------------

    def record(self, record: ScanRecord, completed: CompletedScan | None) -> ScanRecord:
        """Append ``record`` (its id assigned here); for a completed scan, its
        new signals (a known id is kept as it is), markers and checkpoint too."""

        added: list[tuple[SignalState | None, SignalState]] = []

        def write(txn: lmdb.Transaction) -> ScanRecord:
            added.clear()  # a retried write starts again
            sequence = self._log.last_cursor(txn) + 1
            stored = dataclasses.replace(record, id=scan_id_of(sequence))
            if completed is not None:
                for signal in completed.signals:
                    key = signal.id.encode()
                    if self._signals.get(txn, key) is None:
                        self._signals.put(txn, key, dataclasses.replace(signal, scan_id=stored.id))
                        for scope in (_EVERY, _state_scope(signal.state)):
                            txn.put(_order_key(scope, signal), b"", db=self._order)
                        added.append((None, signal.state))
                for task_id, latest in completed.markers:
                    self._markers.put(txn, _marker_key(task_id),
                                      TaskMarker(task_id=task_id, sequence=latest, scan_id=stored.id))
                self._checkpoints.put(txn, _checkpoint_key(record.source), Checkpoint(
                    source=record.source, cursor=completed.checkpoint, scan_id=stored.id,
                    updated_at=record.finished_at))
            self._scans.put(txn, AppendLog.key(sequence), stored)
            return stored

        result = self.store.write(write)
        self._counted(added)
        return result

    def order_signals(self) -> None:
        """Put the signals stored before their order existed into it (once)."""

        def write(txn: lmdb.Transaction) -> None:
            if txn.get(_ORDERED, db=self._order) is not None:
                return
            for _, signal in self._signals.items(txn):
                for scope in (_EVERY, _state_scope(signal.state)):
                    txn.put(_order_key(scope, signal), b"", db=self._order)
            txn.put(_ORDERED, b"", db=self._order)

        if self.store.read(lambda txn: txn.get(_ORDERED, db=self._order)) is None:
            self.store.write(write)

    def advance(self, source: EvidenceSource, cursor: int) -> None:
        """Move ``source``'s checkpoint past records there was nothing to scan in."""

        def write(txn: lmdb.Transaction) -> None:
            key = _checkpoint_key(source)
            found = self._checkpoints.get(txn, key)
            if found is None or found.cursor < cursor:
                self._checkpoints.put(txn, key, Checkpoint(source=source, cursor=cursor,
                                                           scan_id="" if found is None else found.scan_id,
                                                           updated_at=time.time()))

        self.store.write(write)

    def link(self, signal_ids: Iterable[str], candidate_id: str, now: float) -> list[str]:
        """Link each known signal to ``candidate_id``; idempotent, and never
        one a person dismissed or an adopted change resolved."""
        return self._update(signal_ids, {"state": SignalState.LINKED, "candidate_id": candidate_id}, now,
                            unless_state=_SETTLED)

    def set_state(self, signal_ids: Iterable[str], state: SignalState, now: float) -> list[str]:
        return self._update(signal_ids, {"state": state}, now)

    def _update(self, signal_ids: Iterable[str], change: dict[str, object], now: float,
                *, unless_state: frozenset[SignalState] = frozenset()) -> list[str]:
        """Apply ``change`` to each known signal (not in ``unless_state``); the ids changed or already so."""

        moved: list[tuple[SignalState | None, SignalState]] = []

        def write(txn: lmdb.Transaction) -> list[str]:
            moved.clear()  # a retried write starts again
            done: list[str] = []
            for signal_id in dict.fromkeys(signal_ids):
                key = signal_id.encode()
                signal = self._signals.get(txn, key)
                if signal is None or signal.state in unless_state:
                    continue
                changed = dataclasses.replace(signal, **change)  # type: ignore[arg-type]
                if changed != signal:
                    self._signals.put(txn, key, dataclasses.replace(changed, updated_at=now))
                    if changed.state is not signal.state:
                        txn.delete(_order_key(_state_scope(signal.state), signal), db=self._order)
                        txn.put(_order_key(_state_scope(changed.state), changed), b"", db=self._order)
                        moved.append((signal.state, changed.state))
                done.append(signal_id)
            return done

        done = self.store.write(write)
        self._counted(moved)
        return done
