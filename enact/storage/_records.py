"""Record formats: versioned orjson documents and append logs."""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import lmdb
import orjson

from enact.errors import EnactError

Document = dict[str, Any]

_VERSION = "v"
R = TypeVar("R")
_SEQUENCE = struct.Struct(">Q")


class CorruptRecord(EnactError, RuntimeError):
    """A stored value that cannot be read. It is reported, never skipped."""

    def __init__(self, database: str, key: bytes, reason: str) -> None:
        super().__init__(f"corrupt record in database {database!r} at key {key!r}: {reason}")
        self.database = database
        self.key = key


def encode_document(document: Document, *, version: int) -> bytes:
    if _VERSION in document:
        # It would be overwritten by the version here and dropped on reading.
        raise ValueError(f"a stored document may not use the reserved key {_VERSION!r}")
    return orjson.dumps({**document, _VERSION: version})


def decode_document(raw: bytes, *, database: str, key: bytes, max_version: int | None = None) -> Document:
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise CorruptRecord(database, key, f"not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise CorruptRecord(database, key, "not a JSON object")
    version = document.pop(_VERSION, None)
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptRecord(database, key, "no version field")
    if max_version is not None and version > max_version:
        raise CorruptRecord(database, key, f"version {version} is newer than this code reads ({max_version})")
    return document


def raw_items(txn: lmdb.Transaction, handle: lmdb._Database, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The keys and values of ``handle`` that start with ``prefix``, in key order."""
    cursor = txn.cursor(db=handle)
    if not cursor.set_range(prefix):
        return
    for key, raw in cursor:
        if not bytes(key).startswith(prefix):
            return
        yield bytes(key), bytes(raw)


class Table:
    """A named database of documents under caller-chosen keys."""

    def __init__(self, name: str, handle: lmdb._Database, *, version: int) -> None:
        self.name = name
        self.handle = handle
        self.version = version

    def _decode(self, key: bytes, raw: bytes) -> Document:
        return decode_document(raw, database=self.name, key=key, max_version=self.version)

    def get(self, txn: lmdb.Transaction, key: bytes) -> Document | None:
        raw = txn.get(key, db=self.handle)
        return None if raw is None else self._decode(key, bytes(raw))

    def put(self, txn: lmdb.Transaction, key: bytes, document: Document) -> None:
        self.put_encoded(txn, key, encode_document(document, version=self.version))

    def put_encoded(self, txn: lmdb.Transaction, key: bytes, raw: bytes) -> None:
        txn.put(key, raw, db=self.handle)

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        return bool(txn.delete(key, db=self.handle))

    def _trees(self) -> tuple[lmdb._Database, ...]:
        """The LMDB trees the table is kept in, the older first (``enact.storage._tiers``)."""
        return (self.handle,)

    def items(self, txn: lmdb.Transaction, *, prefix: bytes = b"") -> Iterator[tuple[bytes, Document]]:
        trees = self._trees()
        rows = raw_items(txn, trees[0], prefix) if len(trees) == 1 else heapq.merge(
            *(raw_items(txn, tree, prefix) for tree in trees))
        for key, raw in rows:
            yield key, self._decode(key, raw)

    def count(self, txn: lmdb.Transaction) -> int:
        return int(txn.stat(self.handle)["entries"])


class AppendLog(Table):
    """Documents under big-endian sequence keys, so a cursor is a plain integer.

    Sequence numbers start at 1; cursor 0 means "from the beginning", and
    ``read_from(cursor)`` returns the records after ``cursor``.
    """

    @staticmethod
    def key(sequence: int) -> bytes:
        return _SEQUENCE.pack(sequence)

    def last_cursor(self, txn: lmdb.Transaction) -> int:
        cursor = txn.cursor(db=self.handle)
        if not cursor.last():
            return 0
        return int(_SEQUENCE.unpack(cursor.key())[0])

    def append(self, txn: lmdb.Transaction, document: Document) -> int:
        sequence = self.last_cursor(txn) + 1
        # append=True: the key sorts last, so LMDB can skip the tree search.
        txn.put(self.key(sequence), encode_document(document, version=self.version), db=self.handle, append=True)
        return sequence

    def append_many(self, txn: lmdb.Transaction, documents: list[Document]) -> list[int]:
        first = self.last_cursor(txn) + 1
        for offset, document in enumerate(documents):
            key = self.key(first + offset)
            txn.put(key, encode_document(document, version=self.version), db=self.handle, append=True)
        return list(range(first, first + len(documents)))

    def read_from(self, txn: lmdb.Transaction, cursor: int, limit: int) -> list[tuple[int, Document]]:
        records: list[tuple[int, Document]] = []
        if limit <= 0:
            return records
        for sequence, document in self.iterate_from(txn, cursor):
            records.append((sequence, document))
            if len(records) >= limit:
                break
        return records

    def iterate_from(self, txn: lmdb.Transaction, cursor: int) -> Iterator[tuple[int, Document]]:
        start = self.key(cursor + 1)
        for tree in self._trees():
            position = txn.cursor(db=tree)
            if not position.set_range(start):
                continue
            for key, raw in position:
                yield int(_SEQUENCE.unpack(key)[0]), self._decode(bytes(key), bytes(raw))

    def iterate_backwards(self, txn: lmdb.Transaction, *, down_to: int = 0) -> Iterator[tuple[int, Document]]:
        """The records after ``down_to``, newest first."""
        for tree in reversed(self._trees()):
            position = txn.cursor(db=tree)
            if not position.last():
                continue
            for key, raw in position.iterprev():
                sequence = int(_SEQUENCE.unpack(key)[0])
                if sequence <= down_to:
                    return
                yield sequence, self._decode(bytes(key), bytes(raw))

    def get_at(self, txn: lmdb.Transaction, sequence: int) -> Document | None:
        return self.get(txn, self.key(sequence))


def decode_record(cls: type[R], document: Document, *, database: str, key: bytes) -> R:
    """A stored document as the frozen dataclass ``cls``, checked field by
    field by the wire's codec; a mismatch is a ``CorruptRecord`` naming the field."""
    from enact.messages._codec import DecodeError, decode_dataclass

    try:
        record: R = decode_dataclass(cls, document, path="")
    except DecodeError as error:
        raise CorruptRecord(database, key, str(error)) from None
    return record


def encode_record(record: object, *, version: int) -> bytes:
    """A dataclass record as orjson writes it, with the version field: the
    same JSON object a document of the same fields is stored as."""
    raw = orjson.dumps(record)
    if not raw.startswith(b"{"):
        raise TypeError(f"a record is a dataclass, not {type(record).__name__}")
    version_field = orjson.dumps({_VERSION: version})
    return version_field if raw == b"{}" else raw[:-1] + b"," + version_field[1:]


class RecordTable(Generic[R]):
    """A table whose values are frozen dataclasses of one type."""

    def __init__(self, table: Table, cls: type[R], *,
                 upgrade: Callable[[Document], Document] | None = None) -> None:
        self.table = table
        self.cls = cls
        self.upgrade = upgrade
        """Reads a document stored in an older shape as the current one."""

    def _decode(self, key: bytes, document: Document) -> R:
        if self.upgrade is not None:
            document = self.upgrade(document)
        return decode_record(self.cls, document, database=self.table.name, key=key)

    def get(self, txn: lmdb.Transaction, key: bytes) -> R | None:
        document = self.table.get(txn, key)
        return None if document is None else self._decode(key, document)

    def put(self, txn: lmdb.Transaction, key: bytes, record: R) -> None:
        self.table.put_encoded(txn, key, encode_record(record, version=self.table.version))

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        return self.table.delete(txn, key)

    def items(self, txn: lmdb.Transaction, *, prefix: bytes = b"") -> Iterator[tuple[bytes, R]]:
        for key, document in self.table.items(txn, prefix=prefix):
            yield key, self._decode(key, document)
