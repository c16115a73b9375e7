"""The Memory actor's facts: their LMDB layout, and how it reads them.

LMDB is the truth, and the only copy: a ``FactBook`` reads each fact when it
is asked for, through the lookups kept beside the facts
(``enact.memory.lookups``: by merge key, by tag, by update time, ranked for
the startup context), so memory holds no fact however many there are, and a
start loads nothing. The writes the actor has staged for its next group
commit are seen at once by ``get`` and ``by_key`` (what admission and
merging read); every other read is of committed facts (the actor commits
what it staged first).

Databases (keys):
- ``memory.facts``: fact id → ``Fact`` (``enact.memory.fact_records``' compact row)
- ``memory.history``: fact id, NUL, 4-byte big-endian sequence → ``Change``
- ``memory.identity``: the owner's private identity (its records are
  ``enact.memory.context``'s)
- ``memory.meta``: ``change`` → ``ChangeCounter``, bumped in the same
  transaction as every write of a fact, so the search index can say which
  change it reflects; ``lookups`` → the change the lookups reflect (the same,
  unless an older enact wrote facts without them)
- ``memory.lookups``: derived from the facts, in the same transactions
  (``enact.memory.lookups``)
- ``memory.forgetting``: fact id → ``ForgetIntent`` (``enact.memory.forgetting``),
  written with a forgotten fact's deletion, deleted once its copies are reached.
"""

from __future__ import annotations

import heapq
import secrets
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import lmdb

from enact.frozen_dataclass import dataclass
from enact.memory import lookups
from enact.memory.admission import merge_key, slug
from enact.memory.fact_records import decode_fact, decode_facts, encode_fact
from enact.memory.facts import Fact, FactState
from enact.memory.forgetting import FORGETTING
from enact.memory.lookups import LOOKUPS
from enact.memory.ranking import choose
from enact.messages.memory import Change
from enact.storage import RecordTable, Store

FACTS = "memory.facts"
HISTORY = "memory.history"
IDENTITY = "memory.identity"
META = "memory.meta"
DATABASES = (FACTS, HISTORY, IDENTITY, META, FORGETTING, LOOKUPS)

T = TypeVar("T")

_CHANGE_KEY = b"change"
_LOOKUPS_KEY = b"lookups"
_SEQUENCE = struct.Struct(">I")
_LAST_SEQUENCE = _SEQUENCE.pack(2**32 - 1)
_SHOWN_MATCHES = 5
_CHUNK = 1024
"""Facts read per read transaction by a walk over all of them."""
NO_MATCH = "refused: no fact matches; `enact memory list` shows them"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeCounter:
    change: int


class FactRecords:
    """The facts' databases, opened from the Memory actor's store."""

    def __init__(self, store: Store) -> None:
        self.facts = store.table(FACTS)
        self.history = RecordTable(store.table(HISTORY), Change)
        self.meta = RecordTable(store.table(META), ChangeCounter)
        self.lookups = store.handle(LOOKUPS)

    def load(self, txn: lmdb.Transaction) -> tuple[list[Fact], int]:
        """Every fact (for tests and tools: the actor reads them one by one)."""
        facts = decode_facts(txn.cursor(db=self.facts.handle).iternext(), database=FACTS)
        return facts, self.change(txn)

    def change(self, txn: lmdb.Transaction) -> int:
        """The change the facts in LMDB are at."""
        return self._counter(txn, _CHANGE_KEY)

    def _counter(self, txn: lmdb.Transaction, key: bytes) -> int:
        counter = self.meta.get(txn, key)
        return counter.change if counter is not None else 0

    def lookups_current(self, txn: lmdb.Transaction) -> bool:
        """Whether the lookups reflect every write of the facts (a home that
        has facts and no lookups, or whose facts an older enact wrote, has not)."""
        return self.meta.get(txn, _LOOKUPS_KEY) is not None and self._counter(txn, _LOOKUPS_KEY) == self.change(txn)

    def remake_lookups(self, txn: lmdb.Transaction) -> int:
        """Make the lookups again from every fact; how many facts."""
        txn.drop(self.lookups, delete=False)
        count = 0
        for fact in self.walk(txn):
            lookups.add(txn, self.lookups, fact)
            count += 1
        self._mark(txn, self.change(txn))
        return count

    def _mark(self, txn: lmdb.Transaction, change: int) -> None:
        self.meta.put(txn, _CHANGE_KEY, ChangeCounter(change=change))
        self.meta.put(txn, _LOOKUPS_KEY, ChangeCounter(change=change))

    def walk(self, txn: lmdb.Transaction, *, after: bytes = b"", limit: int | None = None) -> Iterator[Fact]:
        """The facts in id order after the id ``after``, a chunk decoded at a time."""
        cursor = txn.cursor(db=self.facts.handle)
        found = cursor.set_range(after + b"\0") if after else cursor.first()
        rows: list[tuple[bytes, bytes | memoryview]] = []
        taken = 0
        while found and (limit is None or taken < limit):
            rows.append((bytes(cursor.key()), cursor.value()))
            taken += 1
            if len(rows) == _CHUNK:
                yield from decode_facts(rows, database=FACTS)
                rows = []
            found = cursor.next()
        yield from decode_facts(rows, database=FACTS)

    def get(self, txn: lmdb.Transaction, fact_id: str) -> Fact | None:
        key = fact_id.encode()
        raw = txn.get(key, db=self.facts.handle)
        return None if raw is None else decode_fact(raw, database=FACTS, key=key)

    def put(self, txn: lmdb.Transaction, fact: Fact, entry: Change, *, change: int) -> None:
        before = self.get(txn, fact.id)
        if before is not None:
            lookups.drop(txn, self.lookups, before)
        txn.put(fact.id.encode(), encode_fact(fact), db=self.facts.handle)
        lookups.add(txn, self.lookups, fact)
        prefix = fact.id.encode() + b"\0"
        self.history.put(txn, prefix + _SEQUENCE.pack(self._next_sequence(txn, prefix)), entry)
        self._mark(txn, change)

    def _next_sequence(self, txn: lmdb.Transaction, prefix: bytes) -> int:
        """One past the fact's last history entry, found by its key alone."""
        cursor = txn.cursor(db=self.history.table.handle)
        found = cursor.prev() if cursor.set_range(prefix + _LAST_SEQUENCE) else cursor.last()
        key = bytes(cursor.key()) if found else b""
        if not (key.startswith(prefix) and len(key) == len(prefix) + _SEQUENCE.size):
            return 0
        return int(_SEQUENCE.unpack(key[len(prefix):])[0]) + 1

    def delete(self, txn: lmdb.Transaction, fact_id: str, *, change: int) -> None:
        """The fact, its lookups and its history: a forgotten fact leaves nothing behind."""
        before = self.get(txn, fact_id)
        if before is not None:
            lookups.drop(txn, self.lookups, before)
        self.facts.delete(txn, fact_id.encode())
        prefix = fact_id.encode() + b"\0"
        for key in [key for key, _ in self.history.table.items(txn, prefix=prefix)]:
            self.history.delete(txn, key)
        self._mark(txn, change)

    def history_of(self, txn: lmdb.Transaction, fact_id: str) -> list[Change]:
        return [entry for _, entry in self.history.items(txn, prefix=fact_id.encode() + b"\0")]

    def count(self, txn: lmdb.Transaction) -> int:
        return int(txn.stat(self.facts.handle)["entries"])


class AllFacts:
    """Every committed fact, read afresh in chunks each time it is iterated
    (the index is rebuilt from it, and searched from it when stale)."""

    def __init__(self, store: Store, records: FactRecords) -> None:
        self.store, self.records = store, records

    def __iter__(self) -> Iterator[Fact]:
        after = b""
        while True:
            def read(txn: lmdb.Transaction, at: bytes = after) -> list[Fact]:
                return list(self.records.walk(txn, after=at, limit=_CHUNK))

            chunk = self.store.read(read)
            yield from chunk
            if len(chunk) < _CHUNK:
                return
            after = chunk[-1].id.encode()


class FactBook:
    """The facts as the Memory actor reads them; see the module's docstring."""

    def __init__(self, store: Store, records: FactRecords | None = None) -> None:
        self.store = store
        self.records = records or FactRecords(store)
        self._db = self.records.lookups
        # Staged for the next commit, not yet durable: fact id → the fact, or
        # None when removed; merge key → its fact's id, or None.
        self._staged: dict[str, tuple[Fact, bool]] = {}
        self._staged_keys: dict[str, str | None] = {}

    def _read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        return self.store.read(fn)

    # -- staging: what the actor wrote and has not committed ------------------

    def staged(self, fact: Fact, *, removed: bool = False) -> tuple[Fact, bool]:
        """``fact`` is written (or removed) in the next commit: seen from now
        on. The token returned settles it (``settle``)."""
        token = (fact, removed)
        self._staged[fact.id] = token
        self._staged_keys[merge_key(fact.text)] = None if removed else fact.id
        return token

    def settle(self, token: tuple[Fact, bool]) -> None:
        """The write ``token`` stands for is committed (or failed): read from
        LMDB again, unless a later write of the fact is still staged."""
        fact, removed = token
        if self._staged.get(fact.id) is token:
            del self._staged[fact.id]
            key = merge_key(fact.text)
            if key in self._staged_keys and self._staged_keys[key] == (None if removed else fact.id):
                del self._staged_keys[key]

    def forget_staged(self, fact_id: str) -> None:
        """A write of the fact failed: LMDB says what it is."""
        token = self._staged.pop(fact_id, None)
        if token is not None:
            self._staged_keys.pop(merge_key(token[0].text), None)

    # -- reading, staged writes included ---------------------------------------

    def get(self, fact_id: str) -> Fact | None:
        token = self._staged.get(fact_id)
        if token is not None:
            return None if token[1] else token[0]
        return self._read(lambda txn: self.records.get(txn, fact_id))

    def by_key(self, key: str) -> Fact | None:
        """The fact whose text has merge key ``key``."""
        if key in self._staged_keys:
            staged = self._staged_keys[key]
            return None if staged is None else self.get(staged)

        def read(txn: lmdb.Transaction) -> Fact | None:
            fact_id = txn.get(lookups.key_digest(key), db=self._db)
            fact = None if fact_id is None else self.records.get(txn, bytes(fact_id).decode())
            return fact if fact is not None and merge_key(fact.text) == key else None

        found = self._read(read)
        return None if found is None or found.id in self._staged else found

    def new_id(self) -> str:
        while True:
            fact_id = f"f-{secrets.token_hex(4)}"
            if fact_id not in self._staged and self.get(fact_id) is None:
                return fact_id

    # -- reading committed facts -------------------------------------------------

    def __len__(self) -> int:
        return self._read(self.records.count)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.every)

    @property
    def every(self) -> AllFacts:
        return AllFacts(self.store, self.records)

    def counts(self) -> dict[FactState, int]:
        def read(txn: lmdb.Transaction) -> dict[FactState, int]:
            pending = lookups.count_under(txn, self._db, lookups.PENDING)
            return {FactState.ACTIVE: self.records.count(txn) - pending, FactState.PENDING: pending}

        return self._read(read)

    @property
    def ranking(self) -> BookRanking:
        return BookRanking(self)

    def _facts(self, txn: lmdb.Transaction, ids: Iterable[str]) -> Iterator[Fact]:
        for fact_id in ids:
            fact = self.records.get(txn, fact_id)
            if fact is not None:
                yield fact

    def select(self, selector: str) -> Fact | str:
        """The one fact ``selector`` names, or why there is none: an exact id
        wins; then the text it equals once normalised; then the one fact whose
        text contains it or that carries it as a tag. Several matches are
        refused, listing them."""
        exact = self.get(selector.strip())
        if exact is not None:
            return exact
        wanted = merge_key(selector)
        if not wanted:
            return "refused: give a fact id, or text or a tag that names one fact"
        same = self.by_key(wanted)
        if same is not None:
            return same
        # A substring may fall anywhere in a word, so every fact's text is
        # looked at (a walk over LMDB: the rare way to name a fact); a tag is looked up.
        tag = slug(selector)
        tagged = set(self._ids_under(lookups.TAG + tag.encode() + b"\0")) if tag else set()
        matching = (fact for fact in self.every if fact.id in tagged or wanted in merge_key(fact.text))
        best: list[tuple[float, tuple[int, ...], Fact]] = []
        count = 0
        for fact in matching:
            count += 1
            item = (fact.updated_at, _reverse(fact.id), fact)
            if len(best) < _SHOWN_MATCHES:
                heapq.heappush(best, item)
            elif item[:2] > best[0][:2]:
                heapq.heapreplace(best, item)
        if count == 0:
            return NO_MATCH
        newest = [fact for _, _, fact in sorted(best, key=lambda item: (-item[0], item[2].id))]
        if count == 1:
            return newest[0]
        shown = "; ".join(f"{fact.id} ({_clip(fact.text)})" for fact in newest)
        more = f"; and {count - _SHOWN_MATCHES} more" if count > _SHOWN_MATCHES else ""
        return f"refused: {count} facts match, forget one by id: {shown}{more}"

    def listing(self, *, tag: str, origin: str, pending: bool, limit: int) -> tuple[list[Fact], int]:
        """The first ``limit`` facts that match, most recently updated first,
        and how many match."""
        def wanted(fact: Fact) -> bool:
            return ((not tag or tag in fact.tags) and (not origin or fact.origin == origin)
                    and (not pending or fact.state is FactState.PENDING))

        if pending or tag:  # a few facts, as a rule: all read, the newest kept
            prefix = lookups.PENDING if pending else lookups.TAG + tag.encode() + b"\0"
            ids = self._ids_under(prefix)
            found = [fact for fact in self._by_ids(ids) if wanted(fact)]
            return heapq.nsmallest(limit, found, key=lambda fact: (-fact.updated_at, fact.id)), len(found)
        newest = self._recent()
        listed = [fact for _, fact in zip(range(max(0, limit)), (f for f in newest if wanted(f)), strict=False)]
        if not origin:
            return listed, len(self)
        return listed, len(listed) + sum(1 for fact in newest if wanted(fact))

    def _ids_under(self, prefix: bytes) -> list[str]:
        def read(txn: lmdb.Transaction) -> list[str]:
            return list(lookups.ids_under(txn, self._db, prefix))

        return self._read(read)

    def _by_ids(self, ids: list[str]) -> Iterator[Fact]:
        for start in range(0, len(ids), _CHUNK):
            def read(txn: lmdb.Transaction, part: list[str] = ids[start:start + _CHUNK]) -> list[Fact]:
                return list(self._facts(txn, part))

            yield from self._read(read)

    def _recent(self) -> Iterator[Fact]:
        """Every fact, most recently updated first, a chunk per read transaction."""
        after = lookups.RECENT

        def read(txn: lmdb.Transaction) -> tuple[list[Fact], bytes]:
            keys = list(zip(range(_CHUNK), lookups.keys_after(txn, self._db, after, lookups.RECENT), strict=False))
            ids = [lookups.recent_id(key) for _, key in keys]
            return list(self._facts(txn, ids)), (keys[-1][1] if keys else b"")

        while True:
            chunk, last = self._read(read)
            yield from chunk
            if not last:
                return
            after = last


def _reverse(fact_id: str) -> tuple[int, ...]:
    """Orders ids backwards, so that a heap of the newest keeps the lower id of a tie."""
    return tuple(-ord(char) for char in fact_id)


class BookRanking:
    """The startup ranking of a ``FactBook``, read from its lookups
    (``enact.memory.ranking.Ranking``)."""

    def __init__(self, book: FactBook) -> None:
        self._book = book

    def select(self, budget: int, *, send_private: bool) -> tuple[list[Fact], int]:
        book = self._book

        def read(txn: lmdb.Transaction) -> tuple[list[Fact], int]:
            buckets = [bucket for private in (False, True) if send_private or not private
                       for bucket in lookups.buckets(txn, book._db, private=private, budget=budget)]
            chosen, left = choose(buckets, budget)
            return list(book._facts(txn, map(lookups.id_of_rank, chosen))), left

        return book._read(read)

    def ranked(self, *, private: bool) -> Iterator[tuple[int, Fact]]:
        book = self._book
        prefix = lookups.RANKED + bytes((private,))
        after = prefix

        def read(txn: lmdb.Transaction) -> tuple[list[tuple[int, Fact]], bytes]:
            keys = list(zip(range(_CHUNK), lookups.keys_after(txn, book._db, after, prefix), strict=False))
            lengths = {lookups.ranked_id(key): lookups.ranked_length(key) for _, key in keys}
            return [(lengths[fact.id], fact) for fact in book._facts(txn, lengths)], (keys[-1][1] if keys else b"")

        while True:
            chunk, last = book._read(read)
            yield from chunk
            if not last:
                return
            after = last

    def withheld(self) -> Iterator[Fact]:
        book = self._book
        for prefix in (lookups.PENDING, lookups.SECRET):
            yield from book._by_ids(book._ids_under(prefix))

    @property
    def total(self) -> int:
        return len(self._book)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
