"""Reading a home's LMDB environment from outside the daemon, for tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import orjson

from enact.home import STATE_DIR

R = TypeVar("R")


@dataclass(frozen=True)
class Snapshot:
    """Everything committed to a home's LMDB environment."""

    last_txnid: int
    databases: dict[bytes, dict[bytes, bytes]]

    def document(self, database: str, key: bytes) -> Any:
        return orjson.loads(self.databases[database.encode()][key])

    def values(self) -> Iterator[tuple[bytes, bytes, bytes]]:
        for name, records in self.databases.items():
            for key, raw in records.items():
                yield name, key, raw


def snapshot(home: Path) -> Snapshot:
    """Read every named database read-only; safe while a daemon runs."""
    env = lmdb.open(str(home / STATE_DIR), readonly=True, max_dbs=64, lock=True)
    try:
        with env.begin() as txn:
            names = [bytes(key) for key, _ in txn.cursor()]
        databases: dict[bytes, dict[bytes, bytes]] = {}
        for name in names:
            handle = env.open_db(name, create=False)
            with env.begin(db=handle) as txn:
                databases[name] = {bytes(k): bytes(v) for k, v in txn.cursor()}
        return Snapshot(last_txnid=int(env.info()["last_txnid"]), databases=databases)
    finally:
        env.close()


def values_under(document: object, key: str) -> Iterator[object]:
    """Every value stored under ``key`` anywhere in a JSON document."""
    if isinstance(document, dict):
        for name, value in document.items():
            if name == key:
                yield value
            yield from values_under(value, key)
    elif isinstance(document, list):
        for item in document:
            yield from values_under(item, key)


def rewrite_record(home: Path, owner: str, databases: Mapping[str, Any], database: str, record_type: type[R],
                   number: int, change: Callable[[R], R], *, version: int = 1) -> R:
    """Rewrite record ``number`` of ``owner``'s ``database`` in a stopped
    daemon's home as ``change`` says (the state a crash or a failing peer
    leaves, planted); the record as it was. ``version``: the table's
    record version (``Store.table``)."""
    from enact.storage import RecordTable, Storage

    storage = Storage(home / STATE_DIR)
    try:
        store = storage.grant(owner, databases)
        table = RecordTable(store.table(database, version=version), record_type)
        key = number.to_bytes(8, "big")
        stored = store.read(lambda txn: table.get(txn, key))
        assert stored is not None, f"no record {number} in {database}"
        store.write(lambda txn: table.put(txn, key, change(stored)), fenced=False)
        return stored
    finally:
        storage.close()
