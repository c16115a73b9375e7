"""Signals are listed a page at a time in the order they were made, by
state, without reading every signal; a home from before that order is
listed all the same and ordered once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from enact.evolution.scan_store import DATABASES, SIGNALS, CompletedScan, ScanTables
from enact.evolution.signals import EvidenceSource, Signal, SignalState
from enact.messages.scanner import ScanRecord
from enact.storage import RecordTable, Storage, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    try:
        yield storage.grant("scanner", DATABASES)
    finally:
        storage.close()


def made(number: int) -> Signal:
    return Signal(id=f"sig-{number:012d}", source=EvidenceSource.FEEDBACK, observation=f"observation {number}",
                  evidence_type="complaint", affected_area="replies", desired_outcome="better", confidence=0.5,
                  explicit=False, evidence_refs=(f"turn:{number}",), state=SignalState.ACTIVE, scan_id="",
                  created_at=1_000.0 + number, updated_at=1_000.0 + number)


def scanned(tables: ScanTables, *signals: Signal) -> None:
    record = ScanRecord(id="", source=EvidenceSource.FEEDBACK, outcome="completed", error="", records=1, refs=(),
                        signals=tuple(s.id for s in signals), started_at=1.0, finished_at=2.0)
    tables.record(record, CompletedScan(signals=signals, checkpoint=len(signals)))


def ids(signals: list[Signal]) -> list[int]:
    return [int(signal.id.removeprefix("sig-")) for signal in signals]


def test_a_page_follows_each_state_as_signals_move_newest_or_oldest_first(store: Store) -> None:
    tables = ScanTables(store)
    tables.order_signals()
    scanned(tables, *(made(n) for n in range(1, 7)))
    tables.link([made(2).id, made(5).id], "cand-1", 2_000.0)
    tables.set_state([made(6).id], SignalState.DISMISSED, 2_000.0)
    assert ids(tables.signals(None, 3)) == [6, 5, 4]
    assert ids(tables.signals(SignalState.ACTIVE, 10)) == [4, 3, 1]
    assert ids(tables.signals(SignalState.ACTIVE, 2, oldest_first=True)) == [1, 3]
    assert ids(tables.signals(SignalState.LINKED, 10)) == [5, 2]
    assert ids(tables.signals(SignalState.DISMISSED, 10)) == [6]
    assert tables.signals(SignalState.RESOLVED, 10) == []
    assert (tables.count(None), tables.count(SignalState.ACTIVE)) == (6, 3)


def test_a_page_reads_only_its_signals_not_every_one(store: Store) -> None:
    tables = ScanTables(store)
    tables.order_signals()
    scanned(tables, *(made(n) for n in range(1, 4)))
    # A record no page names: a read of every signal would meet it and fail.
    store.write(lambda txn: txn.put(b"sig-unreadable", b"not json", db=store.handle(SIGNALS)))
    assert ids(tables.signals(None, 2)) == [3, 2]
    assert ids(tables.signals(SignalState.ACTIVE, 5, oldest_first=True)) == [1, 2, 3]


def test_signals_stored_before_the_order_are_listed_and_then_ordered_once(store: Store) -> None:
    old = RecordTable(store.table(SIGNALS), Signal)
    store.write(lambda txn: [old.put(txn, s.id.encode(), s) for s in (made(1), made(3), made(2))])
    tables = ScanTables(store)
    assert ids(tables.signals(None, 2)) == [3, 2]  # not ordered yet: read as before
    tables.order_signals()
    scanned(tables, made(4))
    assert ids(tables.signals(None, 10)) == [4, 3, 2, 1]
    assert ids(tables.signals(SignalState.ACTIVE, 2, oldest_first=True)) == [1, 2]
    tables.order_signals()  # once: a second call changes nothing
    assert ids(ScanTables(store).signals(None, 10)) == [4, 3, 2, 1]
