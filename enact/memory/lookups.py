"""The facts' lookups, kept in LMDB beside them, so that memory holds no fact.

``memory.lookups`` is derived from ``memory.facts``: every write of a fact
changes its entries in the same transaction, so the two never disagree; a
home whose lookups do not reflect the facts' change counter (made before
they existed, or written by an older enact) has them made again at start.
Each kind of entry has its own first byte; the values are empty unless said:

- ``k`` + 16-byte digest of the merge key → the fact's id (remember merges
  by it; a forget names a fact by its text)
- ``r`` + private (1 byte) + line length (2) + rank (9) + id: the facts that
  may go into a startup context (active, not secret), in the order the
  selection walks them (``enact.memory.ranking``: buckets by privacy and
  length, best first within one)
- ``u`` + update time, newest first (8) + id: every fact, for listing
- ``t`` + tag + NUL + id: the facts carrying a tag
- ``p`` + id: pending facts; ``s`` + id: active secret facts (with the
  ranked ones, every fact is in exactly one of the three)

Keys sort as bytes, so each order is a cursor walk; nothing is sorted and
nothing about a fact stays in memory.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator

import lmdb

from enact.memory.admission import merge_key
from enact.memory.facts import Fact, FactState, Sensitivity
from enact.memory.ranking import line_length

LOOKUPS = "memory.lookups"

KEY = b"k"
RANKED = b"r"
RECENT = b"u"
TAG = b"t"
PENDING = b"p"
SECRET = b"s"

_LENGTH = struct.Struct(">H")
_TIME = struct.Struct(">Q")
_FLOAT = struct.Struct(">d")
_SIGN = 1 << 63
_ALL = (1 << 64) - 1
_BUCKET_BYTES = 1 + 1 + _LENGTH.size
"""``r``, private, length: what the ranked entries of one bucket share."""
MAX_LENGTH = 2**16 - 1


def _newest_first(at: float) -> bytes:
    """``at`` as 8 bytes that sort later times first (any float)."""
    bits = int.from_bytes(_FLOAT.pack(at), "big")
    ascending = (bits ^ _ALL) if bits & _SIGN else (bits | _SIGN)
    return _TIME.pack(_ALL - ascending)


def key_digest(key: str) -> bytes:
    return KEY + hashlib.blake2b(key.encode(), digest_size=16).digest()


def rank_bytes(fact: Fact) -> bytes:
    """Confidence high first, then most recently updated, then the id."""
    return bytes((3 - fact.confidence.rank,)) + _newest_first(fact.updated_at) + fact.id.encode()


def bucket_prefix(private: bool, length: int) -> bytes:
    return RANKED + bytes((private,)) + _LENGTH.pack(min(length, MAX_LENGTH))


def entries(fact: Fact) -> list[tuple[bytes, bytes]]:
    """Every lookup entry of ``fact``."""
    fact_id = fact.id.encode()
    made = [(key_digest(merge_key(fact.text)), fact_id), (RECENT + _newest_first(fact.updated_at) + fact_id, b"")]
    made += [(TAG + tag.encode() + b"\0" + fact_id, b"") for tag in fact.tags]
    if fact.state is FactState.PENDING:
        made.append((PENDING + fact_id, b""))
    elif fact.sensitivity is Sensitivity.SECRET:
        made.append((SECRET + fact_id, b""))
    else:
        private = fact.sensitivity is Sensitivity.PRIVATE
        made.append((bucket_prefix(private, line_length(fact)) + rank_bytes(fact), b""))
    return made


def add(txn: lmdb.Transaction, db: lmdb._Database, fact: Fact) -> None:
    for key, value in entries(fact):
        txn.put(key, value, db=db)


def drop(txn: lmdb.Transaction, db: lmdb._Database, fact: Fact) -> None:
    fact_id = fact.id.encode()
    for key, value in entries(fact):
        # A merge key's entry names whichever fact holds that text now.
        if value == b"" or txn.get(key, db=db) == fact_id:
            txn.delete(key, db=db)


def ids_under(txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes, *, skip: int = 0) -> Iterator[str]:
    """The ids ending the keys under ``prefix``, in key order; ``skip``: the
    bytes between the prefix and the id."""
    cursor = txn.cursor(db=db)
    if not cursor.set_range(prefix):
        return
    start = len(prefix) + skip
    for raw in cursor.iternext(keys=True, values=False):
        key = bytes(raw)
        if not key.startswith(prefix):
            return
        yield key[start:].decode()


def count_under(txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes) -> int:
    return sum(1 for _ in ids_under(txn, db, prefix))


def buckets(txn: lmdb.Transaction, db: lmdb._Database, *, private: bool,
            budget: int) -> Iterator[tuple[int, Iterator[bytes]]]:
    """Each bucket of ranked facts of ``private`` whose lines are no longer
    than ``budget``: its length, and its entries best first (the rank bytes
    and id, which order across buckets as the facts rank), each read when
    asked for."""
    cursor = txn.cursor(db=db)
    length = 0
    while length <= min(budget, MAX_LENGTH):
        if not cursor.set_range(bucket_prefix(private, length)):
            return
        first = bytes(cursor.key())
        if not first.startswith(bucket_prefix(private, 0)[:2]):
            return
        length = _LENGTH.unpack_from(first, 2)[0]
        if length > budget:
            return
        yield length, _bucket(txn, db, first)
        length += 1


def _bucket(txn: lmdb.Transaction, db: lmdb._Database, first: bytes) -> Iterator[bytes]:
    yield first[_BUCKET_BYTES:]
    prefix = first[:_BUCKET_BYTES]
    cursor = txn.cursor(db=db)  # only for a bucket walked past its head
    key = first
    while True:
        if not cursor.set_range(key + b"\0"):
            return
        key = bytes(cursor.key())
        if not key.startswith(prefix):
            return
        yield key[_BUCKET_BYTES:]


def keys_after(txn: lmdb.Transaction, db: lmdb._Database, after: bytes, prefix: bytes) -> Iterator[bytes]:
    """The keys under ``prefix`` that sort after ``after`` (from the first when
    ``after`` is the prefix), in order."""
    cursor = txn.cursor(db=db)
    if not cursor.set_range(after if after == prefix else after + b"\0"):
        return
    for raw in cursor.iternext(keys=True, values=False):
        key = bytes(raw)
        if not key.startswith(prefix):
            return
        yield key


def recent_id(key: bytes) -> str:
    return key[len(RECENT) + _TIME.size:].decode()


def ranked_length(key: bytes) -> int:
    return int(_LENGTH.unpack_from(key, 2)[0])


def ranked_id(key: bytes) -> str:
    return id_of_rank(key[_BUCKET_BYTES:])


def id_of_rank(item: bytes) -> str:
    """The id in a ranked entry's rank bytes and id."""
    return item[1 + _TIME.size:].decode()
