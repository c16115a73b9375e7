"""The Sessions actor's tables as it reads them (enact.chat.kept_tables): staged over
committed over LMDB, on a real LMDB store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from enact.chat.kept_tables import KeptTable
from enact.storage import Storage, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    try:
        yield storage.grant("sessions", ("kept",))
    finally:
        storage.close()


def committed(store: Store, table: KeptTable, documents: dict[bytes, dict[str, int] | None]) -> None:
    table.stage(documents)
    store.write(lambda txn: table.write(txn, documents))
    table.settle(documents, committed=True)


def test_what_was_staged_is_read_before_it_commits_and_what_committed_without_lmdb(store: Store) -> None:
    table = KeptTable(store, store.table("kept"))
    assert table.current(b"a") is None  # read once from LMDB, kept as absent
    staged = {b"a": {"turns": 1}}
    table.stage(staged)
    assert table.current(b"a") == {"turns": 1}
    store.write(lambda txn: table.write(txn, staged))
    table.settle(staged, committed=True)
    assert table.staged == {}
    store.write(lambda txn: table.table.put(txn, b"a", {"turns": 99}))  # behind its back: it is the only writer
    assert table.current(b"a") == {"turns": 1}


def test_a_write_that_failed_is_read_again_from_lmdb(store: Store) -> None:
    table = KeptTable(store, store.table("kept"))
    committed(store, table, {b"a": {"turns": 1}})
    failed = {b"a": {"turns": 2}}
    table.stage(failed)
    table.settle(failed, committed=False)
    store.write(lambda txn: table.table.put(txn, b"a", {"turns": 5}))
    assert table.current(b"a") == {"turns": 5}


def test_a_deletion_is_kept_as_absent(store: Store) -> None:
    table = KeptTable(store, store.table("kept"))
    committed(store, table, {b"a": {"turns": 1}})
    committed(store, table, {b"a": None})
    assert table.current(b"a") is None
    assert store.read(lambda txn: table.table.get(txn, b"a")) is None


def test_only_the_latest_documents_are_kept(store: Store) -> None:
    table = KeptTable(store, store.table("kept"), kept=2)
    for key in (b"a", b"b", b"c"):
        committed(store, table, {key: {"turns": 1}})
    store.write(lambda txn: table.table.put(txn, b"a", {"turns": 7}))
    store.write(lambda txn: table.table.put(txn, b"c", {"turns": 7}))
    assert table.current(b"a") == {"turns": 7}  # let go first, so read again
    assert table.current(b"c") == {"turns": 1}
