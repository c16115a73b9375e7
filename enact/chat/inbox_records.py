"""The inbox's databases, their keys and the typed records in them
(``enact.chat.records``; a turn is the ``inbox.Turn`` the protocol sends).

Receipts and open marks (and the outbox's deliveries) are keyed by the
receipt's sequence number (big-endian), so the records of events in progress
sit together at the end of each tree and a commit touches the same few pages
however long the history grows; ``inbox.ids`` maps an event id to its number.

The receipts, the ids and the turns are each kept in two trees
(``enact.storage.TieredLog``): an event writes only the small trees of recent
records, and ``settle`` moves the old ones on, many at a time, so a commit
costs the same at the ten-thousandth event as at the tenth.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from typing import Generic, TypeVar

import lmdb

from enact.chat.records import CursorRecord, Receipt
from enact.messages.inbox import Turn
from enact.storage import AppendLog, CorruptRecord, RecordTable, Store, TieredLog, encode_record, older_tier

RECEIPTS = "inbox.receipts"
IDS = "inbox.ids"
OPEN = "inbox.open"
CURSORS = "inbox.cursors"
TURNS = "logs.turns"
TIERED = (RECEIPTS, IDS, TURNS)
DATABASES = (RECEIPTS, IDS, OPEN, CURSORS, TURNS, *(older_tier(name) for name in TIERED))

SETTLE_EVERY = 256
"""Receipts made between two settles (``InboxRecords.settle``)."""
RECENT_KEPT = 512
"""Receipts and turns a settle leaves in the recent trees: the events in
progress are among the newest, and their records are written again."""
IDS_SETTLED_AT = 2_560
"""Recent ids that make a settle move the ids of settled receipts. An id's
place is random, so moving many at once writes each page of the older tree
once for all the ids that fall in it; the recent tree stays two levels deep."""
SETTLE_AT_MOST = 4_096
"""Records a settle moves per tree: a home written before the trees were
two catches up over its next settles instead of in one long commit."""

R = TypeVar("R")


class RecordLog(RecordTable[R], Generic[R]):
    """An append log whose values are records of one type."""

    def __init__(self, log: TieredLog, cls: type[R]) -> None:
        super().__init__(log, cls)
        self.log = log

    def append(self, txn: lmdb.Transaction, record: R) -> int:
        sequence = self.log.last_cursor(txn) + 1
        self._put_last(txn, sequence, record)
        return sequence

    def _put_last(self, txn: lmdb.Transaction, sequence: int, record: R) -> None:
        # append=True: the key sorts last, so LMDB can skip the tree search.
        txn.put(self.log.key(sequence), encode_record(record, version=self.log.version), db=self.log.handle,
                append=True)

    def iterate(self, records: Iterator[tuple[int, dict[str, object]]]) -> Iterator[tuple[int, R]]:
        for sequence, document in records:
            yield sequence, self._decode(self.log.key(sequence), document)


class TurnLog(RecordLog[Turn]):
    """``logs.turns``: each turn stored with its cursor, which is its key."""

    def __init__(self, log: TieredLog) -> None:
        super().__init__(log, Turn)

    def append(self, txn: lmdb.Transaction, record: Turn) -> int:
        sequence = self.log.last_cursor(txn) + 1
        self._put_last(txn, sequence, dataclasses.replace(record, cursor=sequence))
        return sequence

    def _decode(self, key: bytes, document: dict[str, object]) -> Turn:
        # A turn logged before its cursor was stored with it has it only as its key.
        turn = super()._decode(key, document)
        sequence = sequence_of(key)
        return turn if turn.cursor == sequence else dataclasses.replace(turn, cursor=sequence)


class InboxRecords:
    """The inbox's databases, opened from its own store."""

    def __init__(self, store: Store) -> None:
        self.ids = store.tiered_table(IDS)
        self.receipts = RecordLog(store.tiered_log(RECEIPTS), Receipt)
        self.open = store.table(OPEN)
        self.cursors = RecordTable(store.table(CURSORS), CursorRecord)
        self.turns = TurnLog(store.tiered_log(TURNS))

    def settle(self, txn: lmdb.Transaction) -> bool:
        """Move the old receipts, turns and ids into the older trees; whether
        more are left to move (a home written before there were two)."""
        receipts, turns = self.receipts.log, self.turns.log
        more = receipts.settle(txn, keep=RECENT_KEPT, at_most=SETTLE_AT_MOST) == SETTLE_AT_MOST
        more |= turns.settle(txn, keep=RECENT_KEPT, at_most=SETTLE_AT_MOST) == SETTLE_AT_MOST
        if self.ids.recent_count(txn) >= IDS_SETTLED_AT:
            settled_through = receipts.settled_through(txn)
            moved = self.ids.settle(txn, lambda _, entry: _settled(entry, settled_through), at_most=SETTLE_AT_MOST)
            more |= moved == SETTLE_AT_MOST
        return more

    def key_of(self, txn: lmdb.Transaction, event_id: str) -> bytes | None:
        entry = self.ids.get(txn, event_id.encode())
        return None if entry is None else AppendLog.key(entry["seq"])

    def find(self, txn: lmdb.Transaction, event_id: str) -> tuple[bytes, Receipt] | None:
        key = self.key_of(txn, event_id)
        if key is None:
            return None
        receipt = self.receipts.get(txn, key)
        if receipt is None:
            raise CorruptRecord(IDS, event_id.encode(), "points at a receipt that does not exist")
        return key, receipt

    def create(self, txn: lmdb.Transaction, event_id: str, receipt: Receipt) -> bytes:
        sequence = self.receipts.append(txn, receipt)
        self.ids.put(txn, event_id.encode(), {"seq": sequence})
        key = AppendLog.key(sequence)
        self.open.put(txn, key, {})
        return key

    def cursor(self, txn: lmdb.Transaction, channel: str) -> int:
        stored = self.cursors.get(txn, channel.encode())
        return stored.cursor if stored is not None else 0


def _settled(entry: dict[str, object], settled_through: int) -> bool:
    # An entry that cannot be read stays where it is, and is reported when it is looked up.
    sequence = entry.get("seq")
    return isinstance(sequence, int) and sequence <= settled_through


def sequence_of(key: bytes) -> int:
    """The receipt number in a receipt's key (the key of its delivery too)."""
    (sequence,) = struct.unpack(">Q", key)
    return int(sequence)
