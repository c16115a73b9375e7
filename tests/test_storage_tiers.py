"""A database kept in two trees (enact.storage._tiers) reads, under every
sequence of writes and settles, exactly as one tree would: checked against a
plain table on the same LMDB, operation by operation. And the older tree is
its database's for schemas: no version of its own, migrated with it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enact.storage import AppendLog, DatabaseSchema, Storage, Store, Table, older_tier

LOG, INDEX = "t.log", "t.index"
PLAIN_LOG, PLAIN_INDEX = "plain.log", "plain.index"
DATABASES = (LOG, INDEX, older_tier(LOG), older_tier(INDEX), PLAIN_LOG, PLAIN_INDEX)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    storage = Storage(tmp_path_factory.mktemp("tiers") / "state")
    yield storage
    storage.close()


@pytest.fixture(scope="module")
def store(storage: Storage) -> Store:
    return storage.grant("tiers", DATABASES)


def _empty(store: Store) -> None:
    def clear(txn: lmdb.Transaction) -> None:
        for name in DATABASES:
            txn.drop(store.handle(name), delete=False)

    store.write(clear)


def _views_of_log(txn: lmdb.Transaction, log: AppendLog) -> tuple[object, ...]:
    return (
        list(log.items(txn)),
        list(log.iterate_from(txn, 0)),
        list(log.iterate_from(txn, 3)),
        log.read_from(txn, 2, 4),
        list(log.iterate_backwards(txn)),
        list(log.iterate_backwards(txn, down_to=5)),
        log.last_cursor(txn),
        log.count(txn),
        [log.get_at(txn, sequence) for sequence in range(0, 30)],
    )


def _views_of_table(txn: lmdb.Transaction, table: Table) -> tuple[object, ...]:
    return (
        list(table.items(txn)),
        list(table.items(txn, prefix=b"k1")),
        table.count(txn),
        [table.get(txn, b"k%d" % n) for n in range(30)],
    )


LOG_STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 99)),
    st.tuples(st.just("put"), st.integers(1, 25)),
    st.tuples(st.just("delete"), st.integers(1, 25)),
    st.tuples(st.just("settle"), st.integers(0, 6), st.integers(1, 8)),
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps=LOG_STEPS)
def test_a_log_in_two_trees_reads_as_one_tree_after_any_appends_updates_deletes_and_settles(
        store: Store, steps: list[tuple[object, ...]]) -> None:
    _empty(store)
    tiered, plain = store.tiered_log(LOG), store.log(PLAIN_LOG)
    for step in steps:
        def apply(txn: lmdb.Transaction, step: tuple[object, ...] = step) -> None:
            match step:
                case ("append", value):
                    assert tiered.append(txn, {"n": value}) == plain.append(txn, {"n": value})
                case ("put", sequence) if plain.get_at(txn, sequence) is not None:
                    for log in (tiered, plain):  # a record written again, as a receipt is
                        log.put(txn, AppendLog.key(sequence), {"again": sequence})
                case ("delete", sequence):
                    assert tiered.delete(txn, AppendLog.key(sequence)) == plain.delete(txn, AppendLog.key(sequence))
                case ("settle", keep, at_most):
                    recent = tiered.recent_count(txn)
                    moved = tiered.settle(txn, keep=keep, at_most=at_most)
                    assert moved == max(0, min(at_most, recent - keep))
            assert _views_of_log(txn, tiered) == _views_of_log(txn, plain)

        store.write(apply)


INDEX_STEPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 29), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.integers(0, 29)),
    st.tuples(st.just("settle"), st.integers(0, 9), st.integers(1, 8)),
), max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps=INDEX_STEPS)
def test_a_table_in_two_trees_reads_as_one_tree_and_a_settled_key_is_never_in_both(
        store: Store, steps: list[tuple[object, ...]]) -> None:
    _empty(store)
    tiered, plain = store.tiered_table(INDEX), store.table(PLAIN_INDEX)
    for step in steps:
        def apply(txn: lmdb.Transaction, step: tuple[object, ...] = step) -> None:
            match step:
                case ("put", n, value):
                    for table in (tiered, plain):
                        table.put(txn, b"k%d" % n, {"seq": value})
                case ("delete", n):
                    assert tiered.delete(txn, b"k%d" % n) == plain.delete(txn, b"k%d" % n)
                case ("settle", through, at_most):
                    tiered.settle(txn, lambda _, entry: entry["seq"] <= through, at_most=at_most)
            assert _views_of_table(txn, tiered) == _views_of_table(txn, plain)
            recent = {key for key, _ in txn.cursor(db=tiered.handle)}
            older = {key for key, _ in txn.cursor(db=tiered.older)}
            assert not recent & older

        store.write(apply)


def test_a_settle_moves_the_oldest_records_beyond_those_kept_and_no_more_than_it_may(store: Store) -> None:
    _empty(store)
    log = store.tiered_log(LOG)
    store.write(lambda txn: log.append_many(txn, [{"n": n} for n in range(10)]))
    assert store.write(lambda txn: log.settle(txn, keep=3, at_most=4)) == 4
    assert store.read(lambda txn: (log.settled_through(txn), log.recent_count(txn))) == (4, 6)
    assert store.write(lambda txn: log.settle(txn, keep=3, at_most=4)) == 3
    assert store.write(lambda txn: log.settle(txn, keep=3, at_most=4)) == 0
    # A record now in the older tree is written where it is; a new one goes to the recent tree.
    store.write(lambda txn: log.put(txn, AppendLog.key(2), {"n": "again"}))
    store.write(lambda txn: log.append(txn, {"n": 10}))
    older = store.read(lambda txn: [struct.unpack(">Q", key)[0] for key, _ in txn.cursor(db=log.older)])
    assert older == [1, 2, 3, 4, 5, 6, 7]
    assert store.read(lambda txn: (log.get_at(txn, 2), log.recent_count(txn), log.last_cursor(txn))) == (
        {"n": "again"}, 4, 11)


@pytest.mark.parametrize("tiered", ["log", "table"])
def test_a_recent_tree_that_grew_deep_is_two_levels_again_once_its_records_settle(store: Store, tiered: str) -> None:
    _empty(store)
    log, table = store.tiered_log(LOG), store.tiered_table(INDEX)
    store.write(lambda txn: log.append_many(txn, [{"n": "x" * 300} for _ in range(30_000)]))
    store.write(lambda txn: [table.put(txn, AppendLog.key(n), {"seq": n}) for n in range(1, 30_001)])
    handle = log.handle if tiered == "log" else table.handle
    assert store.read(lambda txn: txn.stat(handle)["depth"]) == 3

    if tiered == "log":
        store.write(lambda txn: log.settle(txn, keep=100, at_most=100_000))
    else:
        store.write(lambda txn: table.settle(txn, lambda _, entry: entry["seq"] <= 29_900, at_most=100_000))
    assert store.read(lambda txn: (txn.stat(handle)["depth"], txn.stat(handle)["entries"])) == (2, 100)
    read = log.items if tiered == "log" else table.items
    assert [key for key, _ in store.read(lambda txn: list(read(txn)))] == [AppendLog.key(n) for n in range(1, 30_001)]


def test_an_unreadable_entry_stays_in_the_recent_tree_and_the_others_settle(store: Store) -> None:
    _empty(store)
    index = store.tiered_table(INDEX)

    def fill(txn: lmdb.Transaction) -> None:
        index.put(txn, b"a", {"seq": 1})
        txn.put(b"b", b"not json", db=index.handle)
        index.put(txn, b"c", {"seq": 2})

    store.write(fill)
    assert store.write(lambda txn: index.settle(txn, lambda _, entry: True, at_most=10)) == 2
    assert store.read(lambda txn: [bytes(key) for key, _ in txn.cursor(db=index.handle)]) == [b"b"]


def _rewrite_each(txn: lmdb.Transaction, database: lmdb._Database) -> None:
    for key, value in list(txn.cursor(db=database)):
        txn.put(bytes(key), bytes(value).replace(b'"old"', b'"new"'), db=database)


def test_the_older_tree_has_no_version_of_its_own_and_a_migration_rewrites_both_trees(tmp_path: Path) -> None:
    first = Storage(tmp_path / "state")
    store = first.grant("tiers", (LOG, older_tier(LOG)))
    log = store.tiered_log(LOG)
    store.write(lambda txn: log.append_many(txn, [{"n": "old"} for _ in range(5)]))
    store.write(lambda txn: log.settle(txn, keep=2, at_most=10))
    assert LOG in first.schema_versions() and older_tier(LOG) not in first.schema_versions()
    first.close()

    schema = DatabaseSchema(name=LOG, version=2, migrations={1: _rewrite_each})
    second = Storage(tmp_path / "state", schemas=(schema,))
    report = second.migrate(lambda plan: tmp_path / "backup")
    assert report.databases == {LOG: (1, 2)}
    store = second.grant("tiers", (LOG, older_tier(LOG)))
    log = store.tiered_log(LOG, version=2)
    assert store.read(lambda txn: [document["n"] for _, document in log.items(txn)]) == ["new"] * 5
    assert store.read(lambda txn: (log.settled_through(txn), log.recent_count(txn))) == (3, 2)
    assert older_tier(LOG) not in second.schema_versions()
    second.close()
