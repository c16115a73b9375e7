"""Typed records: frozen dataclasses stored as the documents they replace,
and a corrupt one reported by database, key and field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from enact.messages.journal import Step
from enact.storage import CorruptRecord, RecordTable, Storage, Store, encode_document


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state", map_size=1 << 20)
    try:
        yield storage.grant("test", ["journal.steps"])
    finally:
        storage.close()


def step(**changes: object) -> Step:
    fields: dict[str, object] = {"request_id": "r", "index": 0, "command": "touch", "args": {"n": 1},
                                 "state": "done", "receipt": "touched", "ok": True, "updated_at": 1.5}
    return Step(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_record_round_trips_and_is_stored_as_its_document(store: Store) -> None:
    table = store.table("journal.steps")
    steps = RecordTable(table, Step)
    store.write(lambda txn: steps.put(txn, b"k", step()), fenced=False)
    assert store.read(lambda txn: steps.get(txn, b"k")) == step()
    # The same JSON object the untyped document was: no migration needed.
    raw = store.read(lambda txn: bytes(txn.get(b"k", db=table.handle)))
    assert orjson.loads(raw) == orjson.loads(encode_document(
        {"request_id": "r", "index": 0, "command": "touch", "args": {"n": 1}, "state": "done",
         "receipt": "touched", "ok": True, "updated_at": 1.5}, version=1))


@pytest.mark.parametrize(("field", "value", "says"), [
    ("state", "exploded", "'state'"),
    ("ok", "yes", "'ok'"),
    ("index", None, "'index'"),
])
def test_a_corrupt_record_names_its_database_key_and_field(store: Store, field: str, value: object,
                                                           says: str) -> None:
    table = store.table("journal.steps")
    document = orjson.loads(orjson.dumps(step()))
    document[field] = value
    store.write(lambda txn: table.put(txn, b"bad", document), fenced=False)
    steps = RecordTable(table, Step)
    with pytest.raises(CorruptRecord, match=r"journal\.steps") as caught:
        store.read(lambda txn: steps.get(txn, b"bad"))
    assert caught.value.key == b"bad"
    assert field in str(caught.value), says


def test_a_record_missing_a_field_is_corrupt(store: Store) -> None:
    table = store.table("journal.steps")
    document = orjson.loads(orjson.dumps(step()))
    del document["receipt"]
    store.write(lambda txn: table.put(txn, b"short", document), fenced=False)
    with pytest.raises(CorruptRecord, match="missing field 'receipt'"):
        store.read(lambda txn: RecordTable(table, Step).get(txn, b"short"))
