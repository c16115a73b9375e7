"""One of the Sessions actor's tables as that actor reads it: what it staged
for the next commit, over what it read or committed, over LMDB.

The actor is the only writer of its tables, so a document it committed (or
read) stays what the table holds until the actor itself writes that key
again: it keeps the latest ones in memory, and a conversation's call (its
mapping and its notes, every turn) costs no read transaction. A write that
fails forgets the key, which is then read again."""

from __future__ import annotations

from collections.abc import Mapping

import lmdb

from enact.storage import Document, Store, Table

KEPT = 4_096
"""Committed documents kept per table (the oldest first let go): far more
conversations than one daemon runs at once, a few MB at most."""

_NONE = object()


class KeptTable:
    def __init__(self, store: Store, table: Table, *, kept: int = KEPT) -> None:
        self._store = store
        self.table = table
        self._kept = kept
        self.staged: dict[bytes, Document | None] = {}
        """Key -> document (None: deleted) staged but not yet committed."""
        self._committed: dict[bytes, Document | None] = {}

    def current(self, key: bytes) -> Document | None:
        """The document of ``key`` as it will be once what is staged commits."""
        if key in self.staged:
            return self.staged[key]
        found = self._committed.get(key, _NONE)
        if found is not _NONE:
            return found  # type: ignore[return-value]  # _NONE is never stored
        document = self._store.read(lambda txn: self.table.get(txn, key))
        self._keep(key, document)
        return document

    def stage(self, documents: Mapping[bytes, Document | None]) -> None:
        self.staged.update(documents)

    def write(self, txn: lmdb.Transaction, documents: Mapping[bytes, Document | None]) -> None:
        for key, document in documents.items():
            if document is None:
                self.table.delete(txn, key)
            else:
                self.table.put(txn, key, document)

    def settle(self, documents: Mapping[bytes, Document | None], *, committed: bool) -> None:
        """The commit of ``documents`` ended: durable (``committed``), they are
        what the table holds; failed, the keys are read from LMDB again."""
        for key, document in documents.items():
            if committed:
                self._keep(key, document)
            else:
                self._committed.pop(key, None)
            if self.staged.get(key, _NONE) is document:
                del self.staged[key]

    def _keep(self, key: bytes, document: Document | None) -> None:
        committed = self._committed
        committed.pop(key, None)  # kept last: the oldest are let go first
        if len(committed) >= self._kept:
            del committed[next(iter(committed))]
        committed[key] = document
