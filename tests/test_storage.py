"""Storage on a real LMDB environment in a temporary directory."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from enact.storage import (
    SCHEMA_VERSION,
    AppendLog,
    CorruptRecord,
    OwnershipError,
    SchemaError,
    Storage,
    Store,
    decode_document,
    encode_document,
)

from conftest import wait_for


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def storage(state: Path) -> Iterator[Storage]:
    opened = Storage(state, map_size=1 << 20)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def store(storage: Storage) -> Store:
    return storage.grant("tester", ["things", "log"])


def _get_raw(store: Store, database: str, key: bytes) -> bytes:
    raw = store.read(lambda txn: txn.get(key, db=store.handle(database)))
    assert raw is not None, f"no record at {key!r} in {database}"
    return bytes(raw)


def _put_raw(store: Store, database: str, key: bytes, value: bytes) -> None:
    """Write bytes that bypass the document format, as a damaged file would hold."""
    store.write(lambda txn: txn.put(key, value, db=store.handle(database)), fenced=False)


# --- ownership -------------------------------------------------------------------


def test_a_database_owned_by_another_actor_is_refused_at_grant(storage: Storage) -> None:
    storage.grant("inbox", ["inbox.receipts"])
    with pytest.raises(OwnershipError, match=r"memory asked for database 'inbox.receipts', which inbox owns"):
        storage.grant("memory", ["memory.facts", "inbox.receipts"])
    # The refused grant gave nothing away: memory.facts is still free.
    storage.grant("journal", ["memory.facts"])


def test_the_same_owner_may_be_granted_its_databases_again(storage: Storage) -> None:
    first = storage.grant("inbox", ["inbox.receipts"])
    second = storage.grant("inbox", ["inbox.receipts"])
    first.write(lambda txn: first.table("inbox.receipts").put(txn, b"k", {"a": 1}))
    assert second.read(lambda txn: second.table("inbox.receipts").get(txn, b"k")) == {"a": 1}


def test_a_store_opens_only_its_own_databases(storage: Storage, store: Store) -> None:
    storage.grant("other", ["theirs"])
    for name in ("theirs", "never.granted"):
        with pytest.raises(OwnershipError, match=rf"tester does not own database '{name}'"):
            store.handle(name)
        with pytest.raises(OwnershipError):
            store.table(name)
        with pytest.raises(OwnershipError):
            store.log(name)


def test_the_schema_database_belongs_to_storage_itself(storage: Storage) -> None:
    with pytest.raises(OwnershipError, match=r"'storage\.meta', which storage itself owns"):
        storage.grant("sneaky", ["storage.meta"])


# --- the schema record -----------------------------------------------------------


def _reopen(state: Path, **options: Any) -> Storage:
    opened = Storage(state, map_size=1 << 20, **options)
    opened.close()
    return opened


def _schema_on_disk(state: Path) -> Any:
    env = lmdb.open(str(state), max_dbs=64, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            raw = txn.get(b"schema", db=env.open_db(b"storage.meta", txn=txn, create=False))
    finally:
        env.close()
    assert raw is not None, "no schema record was written"
    return decode_document(bytes(raw), database="storage.meta", key=b"schema")["schema"]


def test_a_new_home_gets_the_current_schema_and_reopens(state: Path) -> None:
    _reopen(state)
    assert _schema_on_disk(state) == SCHEMA_VERSION
    _reopen(state)
    assert _schema_on_disk(state) == SCHEMA_VERSION


def test_a_home_from_a_newer_schema_is_refused_in_one_line(state: Path) -> None:
    _reopen(state, schema_version=2, migrations={1: lambda txn, storage: None})
    with pytest.raises(SchemaError) as refused:
        _reopen(state)
    message = str(refused.value)
    assert "\n" not in message
    assert "newer enact (schema 2; this one reads 1)" in message
    assert str(state) in message


def test_an_older_home_is_migrated_by_its_step_in_the_schema_transaction(state: Path) -> None:
    opened = Storage(state, map_size=1 << 20)
    store = opened.grant("tester", ["things"])
    store.write(lambda txn: store.table("things").put(txn, b"a", {"n": 1}))
    opened.close()

    calls: list[int] = []

    def double_every_n(txn: lmdb.Transaction, storage: Storage) -> None:
        calls.append(1)
        handle = storage.open_database(txn, "things")
        for key, raw in list(txn.cursor(db=handle)):
            document = decode_document(bytes(raw), database="things", key=bytes(key))
            txn.put(bytes(key), encode_document({"n": document["n"] * 2}, version=1), db=handle)

    migrated = Storage(state, map_size=1 << 20, schema_version=2, migrations={1: double_every_n})
    try:
        assert calls == [1]
        store = migrated.grant("tester", ["things"])
        assert store.read(lambda txn: store.table("things").get(txn, b"a")) == {"n": 2}
    finally:
        migrated.close()
    # Migrated once: the record now says 2, so the step does not run again.
    _reopen(state, schema_version=2, migrations={1: double_every_n})
    assert calls == [1]


def test_an_older_home_without_a_step_is_refused_and_left_as_it_was(state: Path) -> None:
    _reopen(state)
    ran: list[int] = []
    with pytest.raises(SchemaError, match="has schema 2 and no migration to 3 exists") as refused:
        _reopen(state, schema_version=3, migrations={1: lambda txn, storage: ran.append(1)})
    assert "\n" not in str(refused.value)
    assert ran == [1]
    # Step 1 ran inside the refused transaction, so nothing of it was committed:
    # the home still has schema 1 and migrates from there.
    _reopen(state, schema_version=2, migrations={1: lambda txn, storage: ran.append(2)})
    assert ran == [1, 2]


def test_a_failing_migration_leaves_the_home_unchanged(state: Path) -> None:
    _reopen(state)

    def broken(txn: lmdb.Transaction, storage: Storage) -> None:
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        _reopen(state, schema_version=2, migrations={1: broken})
    _reopen(state)  # still schema 1: this code opens it without a migration


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"\x00garbage", r"cannot be read: corrupt record in database 'storage.meta' at key b'schema'"),
        (b'{"v": 1}', r"is not a number: None"),
        (b'{"schema": "2", "v": 1}', r"is not a number: '2'"),
        (b'{"schema": true, "v": 1}', r"is not a number: True"),
    ],
)
def test_an_unreadable_schema_record_is_a_schema_error(state: Path, raw: bytes, match: str) -> None:
    _reopen(state)
    env = lmdb.open(str(state), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"schema", raw, db=env.open_db(b"storage.meta", txn=txn))
    env.close()
    with pytest.raises(SchemaError, match=match) as refused:
        _reopen(state)
    assert "\n" not in str(refused.value)


# --- tables and documents ----------------------------------------------------------


def test_table_put_get_delete_items_count(store: Store) -> None:
    table = store.table("things")

    def fill(txn: lmdb.Transaction) -> None:
        for key in (b"b:2", b"a:1", b"b:1", b"c:1"):
            table.put(txn, key, {"key": key.decode()})

    store.write(fill)
    assert store.read(lambda txn: table.get(txn, b"a:1")) == {"key": "a:1"}
    assert store.read(lambda txn: table.get(txn, b"missing")) is None
    assert store.read(lambda txn: [k for k, _ in table.items(txn, prefix=b"b:")]) == [b"b:1", b"b:2"]
    assert store.read(lambda txn: [k for k, _ in table.items(txn)]) == [b"a:1", b"b:1", b"b:2", b"c:1"]
    assert store.read(lambda txn: list(table.items(txn, prefix=b"z"))) == []
    assert store.read(table.count) == 4
    assert store.write(lambda txn: table.delete(txn, b"a:1")) is True
    assert store.write(lambda txn: table.delete(txn, b"a:1")) is False
    assert store.read(table.count) == 3


def test_documents_carry_their_version(store: Store) -> None:
    store.write(lambda txn: store.table("things", version=3).put(txn, b"k", {"x": 1}))
    raw = _get_raw(store, "things", b"k")
    assert decode_document(raw, database="things", key=b"k") == {"x": 1}
    assert b'"v":3' in raw
    # A reader of version 3 or later reads it; an older reader reports it, never guesses.
    assert store.read(lambda txn: store.table("things", version=4).get(txn, b"k")) == {"x": 1}
    with pytest.raises(CorruptRecord, match=r"'things' at key b'k': version 3 is newer than this code reads \(2\)"):
        store.read(lambda txn: store.table("things", version=2).get(txn, b"k"))


def test_a_document_may_not_use_the_version_key(store: Store) -> None:
    table = store.table("things")
    with pytest.raises(ValueError, match="reserved key 'v'"):
        store.write(lambda txn: table.put(txn, b"k", {"v": "mine"}))
    assert store.read(lambda txn: table.get(txn, b"k")) is None


def test_a_write_is_committed_when_it_returns_and_survives_a_reopen(state: Path) -> None:
    opened = Storage(state, map_size=1 << 20)
    store = opened.grant("tester", ["things"])
    store.write(lambda txn: store.table("things").put(txn, b"k", {"kept": True}))
    opened.close()
    reopened = Storage(state, map_size=1 << 20)
    try:
        store = reopened.grant("tester", ["things"])
        assert store.read(lambda txn: store.table("things").get(txn, b"k")) == {"kept": True}
    finally:
        reopened.close()


def test_a_write_that_raises_commits_nothing(store: Store) -> None:
    table = store.table("things")

    def half_done(txn: lmdb.Transaction) -> None:
        table.put(txn, b"k", {"x": 1})
        raise RuntimeError("crash in the middle")

    with pytest.raises(RuntimeError, match="crash in the middle"):
        store.write(half_done)
    assert store.read(lambda txn: table.get(txn, b"k")) is None


# --- corrupt records are reported, never skipped ----------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x00\xffgarbage", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"x": 1}', "no version field"),
        (b'{"x": 1, "v": true}', "no version field"),
        (b'{"x": 1, "v": "1"}', "no version field"),
    ],
)
def test_a_corrupt_record_names_its_database_and_key(store: Store, raw: bytes, reason: str) -> None:
    table = store.table("things")

    def fill(txn: lmdb.Transaction) -> None:
        for key in (b"a", b"c"):
            table.put(txn, key, {"ok": True})

    store.write(fill)
    _put_raw(store, "things", b"b", raw)
    expected = rf"corrupt record in database 'things' at key b'b': {reason}"
    with pytest.raises(CorruptRecord, match=expected) as on_get:
        store.read(lambda txn: table.get(txn, b"b"))
    assert (on_get.value.database, on_get.value.key) == ("things", b"b")
    with pytest.raises(CorruptRecord, match=expected):
        store.read(lambda txn: list(table.items(txn)))
    # The good records around it still read one by one.
    assert store.read(lambda txn: table.get(txn, b"c")) == {"ok": True}


def test_a_corrupt_log_record_stops_read_from(store: Store) -> None:
    log = store.log("log")
    store.write(lambda txn: log.append_many(txn, [{"n": 1}, {"n": 2}]))
    _put_raw(store, "log", AppendLog.key(3), b"\x00not json")
    store.write(lambda txn: log.append(txn, {"n": 4}))
    assert store.read(lambda txn: log.read_from(txn, 0, 2)) == [(1, {"n": 1}), (2, {"n": 2})]
    key = repr(AppendLog.key(3)).replace("\\", "\\\\")
    for cursor in (0, 2):
        with pytest.raises(CorruptRecord, match=rf"database 'log' at key {key}"):
            store.read(functools.partial(log.read_from, cursor=cursor, limit=10))
    with pytest.raises(CorruptRecord):
        store.read(lambda txn: log.get_at(txn, 3))
    # The corrupt record is neither skipped nor overwritten by later appends.
    assert store.read(lambda txn: log.read_from(txn, 3, 10)) == [(4, {"n": 4})]
    assert store.read(log.last_cursor) == 4
    assert _get_raw(store, "log", AppendLog.key(3)) == b"\x00not json"


# --- append logs -----------------------------------------------------------------


def test_append_log_cursors(store: Store) -> None:
    log = store.log("log")
    assert store.read(log.last_cursor) == 0
    assert store.read(lambda txn: log.read_from(txn, 0, 10)) == []
    assert store.write(lambda txn: log.append(txn, {"n": 1})) == 1
    assert store.write(lambda txn: log.append(txn, {"n": 2})) == 2
    assert store.write(lambda txn: log.append_many(txn, [{"n": 3}, {"n": 4}, {"n": 5}])) == [3, 4, 5]
    assert store.write(lambda txn: log.append_many(txn, [])) == []
    assert store.read(log.last_cursor) == 5
    read = store.read
    assert read(lambda txn: log.read_from(txn, 0, 2)) == [(1, {"n": 1}), (2, {"n": 2})]
    assert read(lambda txn: log.read_from(txn, 2, 2)) == [(3, {"n": 3}), (4, {"n": 4})]
    assert read(lambda txn: log.read_from(txn, 4, 10)) == [(5, {"n": 5})]
    assert read(lambda txn: log.read_from(txn, 5, 10)) == []
    assert read(lambda txn: log.read_from(txn, 99, 10)) == []
    assert read(lambda txn: log.read_from(txn, 0, 0)) == []
    assert read(lambda txn: log.get_at(txn, 4)) == {"n": 4}
    assert read(lambda txn: log.get_at(txn, 6)) is None


def test_append_log_reads_backwards_from_the_newest(store: Store) -> None:
    log = store.log("log")

    def backwards(down_to: int = 0) -> list[int]:
        return store.read(lambda txn: [seq for seq, _ in log.iterate_backwards(txn, down_to=down_to)])

    assert backwards() == []
    store.write(lambda txn: log.append_many(txn, [{"n": i} for i in range(1, 6)]))
    things = store.table("things")
    store.write(lambda txn: things.put(txn, b"\xff", {"other": True}))  # another database's records stay apart
    assert backwards() == [5, 4, 3, 2, 1]
    assert backwards(down_to=3) == [5, 4]
    assert backwards(down_to=5) == []
    assert store.read(lambda txn: next(log.iterate_backwards(txn))) == (5, {"n": 5})


def test_append_many_is_one_transaction(storage: Storage, store: Store) -> None:
    log = store.log("log")
    transactions: list[int] = []
    storage.set_write_guard(lambda txn: transactions.append(1))
    assert store.write(lambda txn: log.append_many(txn, [{"n": i} for i in range(100)])) == list(range(1, 101))
    assert transactions == [1]

    def then_fail(txn: lmdb.Transaction) -> None:
        log.append_many(txn, [{"n": i} for i in range(10)])
        raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        store.write(then_fail)
    assert store.read(log.last_cursor) == 100


def test_cursors_are_big_endian_so_order_holds_past_one_and_two_bytes(store: Store) -> None:
    log = store.log("log")
    total = 65536 + 10
    store.write(lambda txn: log.append_many(txn, [{} for _ in range(total)]))
    assert store.read(log.last_cursor) == total
    sequences = store.read(lambda txn: [sequence for sequence, _ in log.iterate_from(txn, 0)])
    assert sequences == list(range(1, total + 1))
    assert store.read(lambda txn: [s for s, _ in log.read_from(txn, 254, 3)]) == [255, 256, 257]
    assert store.read(lambda txn: [s for s, _ in log.read_from(txn, 65534, 3)]) == [65535, 65536, 65537]
    assert store.write(lambda txn: log.append(txn, {})) == total + 1
    assert AppendLog.key(256) == b"\x00\x00\x00\x00\x00\x00\x01\x00"


def test_a_log_record_of_a_newer_version_is_reported(store: Store) -> None:
    store.write(lambda txn: store.log("log", version=2).append(txn, {"n": 1}))
    with pytest.raises(CorruptRecord, match="version 2 is newer than this code reads"):
        store.read(lambda txn: store.log("log", version=1).read_from(txn, 0, 10))


# --- the map grows on demand ------------------------------------------------------


def test_a_full_map_grows_and_the_transaction_is_retried(state: Path) -> None:
    small = 64 * 1024
    opened = Storage(state, map_size=small)
    try:
        store = opened.grant("tester", ["log"])
        log = store.log("log")
        blob = "x" * 4000
        store.write(lambda txn: log.append_many(txn, [{"blob": blob} for _ in range(500)]))  # 2 MB at once
        for _ in range(4):
            store.write(lambda txn: log.append_many(txn, [{"blob": blob} for _ in range(128)]))
        stats = opened.stats()
        assert stats.map_bytes > small
        assert 3_000_000 < stats.used_bytes <= stats.map_bytes
        assert store.read(log.last_cursor) == 1012
        assert store.read(lambda txn: log.get_at(txn, 1012)) == {"blob": blob}
        assert store.read(lambda txn: log.get_at(txn, 1)) == {"blob": blob}
    finally:
        opened.close()
    # Reopening with the small initial size still reads and writes everything.
    reopened = Storage(state, map_size=small)
    try:
        store = reopened.grant("tester", ["log"])
        log = store.log("log")
        assert store.read(log.last_cursor) == 1012
        store.write(lambda txn: log.append(txn, {"blob": "x" * 100_000}))
    finally:
        reopened.close()


def test_the_map_grows_while_other_threads_read_and_write(state: Path) -> None:
    opened = Storage(state, map_size=64 * 1024)
    try:
        stores = [opened.grant(f"writer{i}", [f"log{i}"]) for i in range(3)]
        errors: list[BaseException] = []
        done = threading.Event()

        def write(store: Store, name: str) -> None:
            try:
                log = store.log(name)
                for _ in range(40):
                    store.write(lambda txn: log.append(txn, {"blob": "y" * 16_000}))
            except BaseException as error:
                errors.append(error)

        def read(store: Store, name: str) -> None:
            try:
                log = store.log(name)
                while not done.is_set():
                    store.read(lambda txn: log.read_from(txn, 0, 5))
            except BaseException as error:
                errors.append(error)

        writers = [threading.Thread(target=write, args=(s, f"log{i}")) for i, s in enumerate(stores)]
        reader = threading.Thread(target=read, args=(stores[0], "log0"))
        reader.start()
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(timeout=30)
        done.set()
        reader.join(timeout=10)
        assert not any(t.is_alive() for t in [*writers, reader]), "a thread is stuck (deadlock in map growth?)"
        assert errors == []
        for i, store in enumerate(stores):
            assert store.read(store.log(f"log{i}").last_cursor) == 40
    finally:
        opened.close()


_GROW_IN_ANOTHER_PROCESS = """
import sys
from pathlib import Path
from enact.storage import Storage
storage = Storage(Path(sys.argv[1]), map_size=64 * 1024)
store = storage.grant("tester", ["log"])
log = store.log("log")
store.write(lambda txn: log.append_many(txn, [{"blob": "z" * 4000} for _ in range(1000)]))
print(storage.stats().map_bytes)
storage.close()
"""


def test_a_map_grown_by_another_process_is_adopted(state: Path) -> None:
    opened = Storage(state, map_size=64 * 1024)
    try:
        store = opened.grant("tester", ["log"])
        log = store.log("log")
        store.write(lambda txn: log.append(txn, {"first": True}))
        grown = subprocess.run(
            [sys.executable, "-c", _GROW_IN_ANOTHER_PROCESS, str(state)],
            capture_output=True, text=True, timeout=60, check=True,
        )
        assert int(grown.stdout) > 4_000_000
        assert store.read(log.last_cursor) == 1001
        assert store.write(lambda txn: log.append(txn, {"last": True})) == 1002
        assert store.read(lambda txn: log.get_at(txn, 1000)) == {"blob": "z" * 4000}
    finally:
        opened.close()


# --- the write guard (how the epoch fence refuses stale writes) --------------------


class Refused(Exception):
    pass


def test_the_write_guard_refuses_fenced_writes_and_commits_nothing(storage: Storage, store: Store) -> None:
    table = store.table("things")
    generation = {"current": 1}

    def guard(txn: lmdb.Transaction) -> None:
        if generation["current"] != 1:
            raise Refused("superseded")

    storage.set_write_guard(guard)
    store.write(lambda txn: table.put(txn, b"before", {"n": 1}))
    generation["current"] = 2
    ran: list[str] = []

    def effect(txn: lmdb.Transaction) -> None:
        ran.append("effect")
        table.put(txn, b"after", {"n": 2})

    with pytest.raises(Refused, match="superseded"):
        store.write(effect)
    assert ran == []  # the guard runs first, inside the same transaction
    assert store.read(lambda txn: table.get(txn, b"after")) is None
    # An unfenced write (the fence's own bookkeeping) goes through.
    store.write(lambda txn: table.put(txn, b"unfenced", {"n": 3}), fenced=False)
    assert store.read(lambda txn: table.get(txn, b"unfenced")) == {"n": 3}
    # Reads are never fenced.
    assert store.read(lambda txn: table.get(txn, b"before")) == {"n": 1}
    storage.set_write_guard(None)
    store.write(effect)
    assert store.read(lambda txn: table.get(txn, b"after")) == {"n": 2}


def test_the_guard_sees_the_transaction_it_guards(storage: Storage, store: Store) -> None:
    seen: list[int] = []
    table = store.table("things")
    storage.set_write_guard(lambda txn: seen.append(table.count(txn)))
    store.write(lambda txn: table.put(txn, b"a", {}))
    store.write(lambda txn: table.put(txn, b"b", {}))
    assert seen == [0, 1]


def test_stats_report_the_map_and_its_use(storage: Storage, store: Store) -> None:
    before = storage.stats()
    store.write(lambda txn: store.table("things").put(txn, b"k", {"blob": "x" * 100_000}))
    after = storage.stats()
    assert after.map_bytes == 1 << 20
    assert before.used_bytes < after.used_bytes <= after.map_bytes
    assert after.path == str(storage.path)
    assert after.databases >= 3  # storage.meta, things, log



def test_a_waiting_resize_holds_back_new_transactions_but_not_nested_ones() -> None:
    from enact.storage._environment import _SharedExclusiveLock

    lock = _SharedExclusiveLock()
    order: list[str] = []
    release_holder = threading.Event()
    nested_done = threading.Event()

    def holder() -> None:
        with lock.shared():
            release_holder.wait(5)
            with lock.shared():  # nested: must not wait for the resize that waits for us
                order.append("nested")
                nested_done.set()
        order.append("holder released")

    def resize() -> None:
        with lock.exclusive():
            order.append("resize")

    def newcomer() -> None:
        with lock.shared():
            order.append("newcomer")

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    wait_for(lambda: lock._shared == 1, timeout=5, what="the holder's shared hold", every=0.005)
    threads.append(threading.Thread(target=resize))
    threads[1].start()
    wait_for(lambda: lock._exclusive_waiting == 1, timeout=5, what="the resize waiting", every=0.005)
    threads.append(threading.Thread(target=newcomer))
    threads[2].start()
    release_holder.set()
    assert nested_done.wait(5)
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert order == ["nested", "holder released", "resize", "newcomer"]
