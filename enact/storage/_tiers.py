"""A database kept in two trees: the recent records, and the older ones.

A durable commit costs about what the pages it dirties cost, and on a disk
where a page written far from the others costs several times one written
near them (``bench/chat_home.py`` measured 10 pages spread over 128 MB at
three times 10 pages within 1 MB), a tree that grows with every event the
daemon ever handled makes each new event dearer: its path gets a level
deeper, and for a table under random keys (an index by event id) every
insert dirties a page somewhere in the whole history, whose old copy then
joins the pool LMDB takes the next pages from.

So the records an event writes go into a small tree of recent ones, and
``settle`` moves the old ones, many at a time, into a second tree that
nothing else writes: ``<name>.older`` (``older_tier``). Readers see one
database: a key is looked up in both, and ``items`` gives both in key
order. The older tree is the same database for its schema: it has no
version record of its own, and a migration step of the database runs on
both trees (``Storage.migrate``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import lmdb

from enact.storage._records import _SEQUENCE, AppendLog, CorruptRecord, Document, Table, raw_items

OLDER_TIER = ".older"
SHALLOW = 2
"""Levels a recent tree is kept to: the few hundred records of a few
thousand events fit under one branch page."""


def older_tier(name: str) -> str:
    """The name of the database holding ``name``'s older records."""
    return name + OLDER_TIER


def is_older_tier(name: str) -> bool:
    return name.endswith(OLDER_TIER)


class _TwoTrees(Table):
    """What a table and a log in two trees share: a key is read from the
    recent tree, else the older one, and counted in both."""

    def __init__(self, name: str, handle: lmdb._Database, older: lmdb._Database, *, version: int) -> None:
        super().__init__(name, handle, version=version)
        self.older = older

    def get(self, txn: lmdb.Transaction, key: bytes) -> Document | None:
        raw = txn.get(key, db=self.handle)
        if raw is None:
            raw = txn.get(key, db=self.older)
        return None if raw is None else self._decode(key, bytes(raw))

    def _trees(self) -> tuple[lmdb._Database, ...]:
        return (self.older, self.handle)

    def count(self, txn: lmdb.Transaction) -> int:
        return self.recent_count(txn) + int(txn.stat(self.older)["entries"])

    def recent_count(self, txn: lmdb.Transaction) -> int:
        return int(txn.stat(self.handle)["entries"])

    def _keep_shallow(self, txn: lmdb.Transaction) -> None:
        """Write the recent tree again when it is deeper than two levels.

        LMDB does not lower a tree once it has grown, however many records
        leave it: a recent tree that held a large history (a home from
        before the two trees, or a burst) would stay a level deeper, with
        half-empty pages, after its records settled. Its few records written
        again, in order, make it as shallow as they need."""
        if txn.stat(self.handle)["depth"] <= SHALLOW:
            return
        kept = list(raw_items(txn, self.handle, b""))
        txn.drop(self.handle, delete=False)
        for key, raw in kept:
            txn.put(key, raw, db=self.handle, append=True)


class TieredTable(_TwoTrees):
    """A table under any keys, kept in a recent and an older tree."""

    def put_encoded(self, txn: lmdb.Transaction, key: bytes, raw: bytes) -> None:
        # A key already settled is written where it is, so it is never in both trees.
        where = self.older if txn.get(key, db=self.older) is not None else self.handle
        txn.put(key, raw, db=where)

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        return bool(txn.delete(key, db=self.handle)) | bool(txn.delete(key, db=self.older))

    def _settled(self, key: bytes, raw: bytes, settled: Callable[[bytes, Document], bool]) -> bool:
        try:
            return settled(key, self._decode(key, raw))
        except CorruptRecord:
            return False  # it stays, and is reported when it is read

    def settle(self, txn: lmdb.Transaction, settled: Callable[[bytes, Document], bool], *, at_most: int) -> int:
        """Move the recent records that ``settled`` says are old (at most
        ``at_most``) into the older tree, in key order, so that each of its
        pages is written once for all the keys that fall in it; how many moved."""
        old = ((key, raw) for key, raw in raw_items(txn, self.handle, b"") if self._settled(key, raw, settled))
        moving = list(itertools.islice(old, at_most))
        for key, raw in moving:
            txn.put(key, raw, db=self.older)
            txn.delete(key, db=self.handle)
        self._keep_shallow(txn)
        return len(moving)


class TieredLog(_TwoTrees, AppendLog):
    """An append log kept in a recent and an older tree: every key in the
    older tree is below every key in the recent one, so the older tree is
    only ever appended to, and a record's key says which tree holds it."""

    def _last_settled(self, txn: lmdb.Transaction) -> bytes | None:
        cursor = txn.cursor(db=self.older)
        return bytes(cursor.key()) if cursor.last() else None

    def _holder(self, txn: lmdb.Transaction, key: bytes) -> lmdb._Database:
        last_settled = self._last_settled(txn)
        return self.older if last_settled is not None and key <= last_settled else self.handle

    def put_encoded(self, txn: lmdb.Transaction, key: bytes, raw: bytes) -> None:
        txn.put(key, raw, db=self._holder(txn, key))

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        return bool(txn.delete(key, db=self._holder(txn, key)))

    def last_cursor(self, txn: lmdb.Transaction) -> int:
        cursor = txn.cursor(db=self.handle)
        if cursor.last():
            return int(_SEQUENCE.unpack(cursor.key())[0])
        return self.settled_through(txn)

    def settled_through(self, txn: lmdb.Transaction) -> int:
        """The last sequence number in the older tree (0: none yet)."""
        last_settled = self._last_settled(txn)
        return 0 if last_settled is None else int(_SEQUENCE.unpack(last_settled)[0])

    def settle(self, txn: lmdb.Transaction, *, keep: int, at_most: int) -> int:
        """Move the oldest recent records, all but the newest ``keep`` and at
        most ``at_most`` of them, to the older tree; how many moved."""
        moving = max(0, min(at_most, self.recent_count(txn) - keep))
        if moving:
            position = txn.cursor(db=self.handle)
            position.first()
            for _ in range(moving):
                # append=True: the older tree's keys are all below these.
                txn.put(position.key(), position.value(), db=self.older, append=True)
                position.delete()  # and the cursor is on the next record
        self._keep_shallow(txn)
        return moving
