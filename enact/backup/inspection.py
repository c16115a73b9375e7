"""Reading a copied LMDB environment read-only: the facts a manifest
records of it, and every record decoded (``verify``)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lmdb

from enact.errors import EnactError
from enact.memory.book import FACTS
from enact.memory.fact_records import decode_fact
from enact.memory.lookups import LOOKUPS
from enact.storage import UNVERSIONED, CorruptRecord, decode_document, recorded_versions

_MAX_DBS = 1024
_META = "storage.meta"
_EPOCH = "epoch"
_GENERATION = b"generation"
_COUNTER = struct.Struct(">Q")
RAW_DATABASES = frozenset({"tasks.index", "evolution.signal_order", "evolution.audit_index", LOOKUPS})
"""Databases whose values are not documents (index entries: empty, or a
packed id; memory's lookups, a fact id). Their keys are checked by the
tables they index."""


class UnreadableCopy(EnactError):
    """The copied environment does not open; the message says why."""


@contextmanager
def opened(state: Path) -> Iterator[lmdb.Environment]:
    try:
        environment = lmdb.open(str(state), readonly=True, lock=False, subdir=True, max_dbs=_MAX_DBS)
    except lmdb.Error as error:
        raise UnreadableCopy(f"{state} does not open as LMDB: {error}") from None
    try:
        yield environment
    finally:
        environment.close()


def database_names(environment: lmdb.Environment, txn: lmdb.Transaction) -> list[str]:
    """The named databases: the keys of LMDB's main database."""
    return [bytes(key).decode("utf-8", "replace") for key, _ in txn.cursor()]


def copied_facts(state: Path) -> tuple[dict[str, int], int]:
    """The schema versions (name -> version) and the fence generation the
    environment in ``state`` records."""
    with opened(state) as environment, environment.begin() as txn:
        names = database_names(environment, txn)
        schemas: dict[str, int] = {}
        if _META in names:
            meta = environment.open_db(_META.encode(), txn=txn, create=False)
            raw = txn.get(b"schema", db=meta)
            if raw is not None:
                found = decode_document(bytes(raw), database=_META, key=b"schema").get("schema")
                if isinstance(found, int):
                    schemas["environment"] = found
            recorded = recorded_versions(txn, meta, state)
            # A database with no record was written before versions were: version 1.
            schemas.update({name: recorded.get(name, UNVERSIONED) for name in names if name != _META})
        generation = 0
        if _EPOCH in names:
            raw = txn.get(_GENERATION, db=environment.open_db(_EPOCH.encode(), txn=txn, create=False))
            if raw is not None and len(raw) == _COUNTER.size:
                generation = int(_COUNTER.unpack(bytes(raw))[0])
        return schemas, generation


def check_record(database: str, key: bytes, raw: bytes) -> None:
    """Raise CorruptRecord when the value under ``key`` does not decode as
    its database stores values."""
    if database in RAW_DATABASES:
        return
    if database == _EPOCH and key == _GENERATION:
        if len(raw) != _COUNTER.size:
            raise CorruptRecord(database, key, f"a generation is {_COUNTER.size} bytes, not {len(raw)}")
        return
    if database == FACTS:
        decode_fact(raw, database=database, key=key)
        return
    decode_document(raw, database=database, key=key)


def first_bad_record(state: Path) -> tuple[CorruptRecord | None, int]:
    """The first record that does not decode, database by database, key by
    key (None if every one does), and how many records were read."""
    read = 0
    with opened(state) as environment, environment.begin() as txn:
        for name in database_names(environment, txn):
            try:
                handle = environment.open_db(name.encode(), txn=txn, create=False)
            except lmdb.Error as error:
                return CorruptRecord(name, b"", f"the database does not open: {error}"), read
            try:
                for key, value in txn.cursor(db=handle):
                    read += 1
                    check_record(name, bytes(key), bytes(value))
            except CorruptRecord as error:
                return error, read
            except lmdb.Error as error:
                return CorruptRecord(name, b"", f"LMDB cannot read it: {error}"), read
    return None, read
