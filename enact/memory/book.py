"""The Memory actor's facts: their LMDB layout, and the copy it keeps in memory.

LMDB is the truth. The actor loads every fact at start into a ``FactBook``
(by id, by merge key, by tag, and ranked for the startup context), so that
admission, merging, selection and the context read memory, not disk, at any
size; each change is written through.

Databases (keys):
- ``memory.facts``: fact id → ``Fact`` (``enact.memory.fact_records``' compact row)
- ``memory.history``: fact id, NUL, 4-byte big-endian sequence → ``Change``
- ``memory.identity``: the owner's private identity (its records are
  ``enact.memory.context``'s)
- ``memory.meta``: ``change`` → ``ChangeCounter``, bumped in the same
  transaction as every write of a fact, so the search index can say which
  change it reflects.
- ``memory.forgetting``: fact id → ``ForgetIntent`` (``enact.memory.forgetting``),
  written with a forgotten fact's deletion, deleted once its copies are reached.
"""

from __future__ import annotations

import gc
import secrets
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import lmdb

from enact.memory.admission import merge_key, slug
from enact.memory.fact_records import decode_fact, decode_facts, encode_fact
from enact.memory.facts import Fact, FactState
from enact.memory.forgetting import FORGETTING
from enact.memory.ranking import StartupRanking
from enact.messages.memory import Change
from enact.storage import RecordTable, Store

FACTS = "memory.facts"
HISTORY = "memory.history"
IDENTITY = "memory.identity"
META = "memory.meta"
DATABASES = (FACTS, HISTORY, IDENTITY, META, FORGETTING)

_CHANGE_KEY = b"change"
_SEQUENCE = struct.Struct(">I")
_LAST_SEQUENCE = _SEQUENCE.pack(2**32 - 1)
_SHOWN_MATCHES = 5
NO_MATCH = "refused: no fact matches; `enact memory list` shows them"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeCounter:
    change: int


@contextmanager
def collector_paused() -> Iterator[None]:
    """Loading makes a few hundred thousand objects that all live on; the
    cyclic collector would walk the growing heap again and again meanwhile
    (most of the cost of a load at 100,000 facts)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_book(store: Store, records: FactRecords) -> tuple[FactBook, int]:
    """Every fact from LMDB into a book, and the change counter they are at."""
    with collector_paused():
        facts, change = store.read(records.load)
        return FactBook(facts), change


class FactRecords:
    """The facts' databases, opened from the Memory actor's store."""

    def __init__(self, store: Store) -> None:
        self.facts = store.table(FACTS)
        self.history = RecordTable(store.table(HISTORY), Change)
        self.meta = RecordTable(store.table(META), ChangeCounter)

    def load(self, txn: lmdb.Transaction) -> tuple[list[Fact], int]:
        facts = decode_facts(txn.cursor(db=self.facts.handle).iternext(), database=FACTS)
        return facts, self.change(txn)

    def change(self, txn: lmdb.Transaction) -> int:
        """The change the facts in LMDB are at."""
        counter = self.meta.get(txn, _CHANGE_KEY)
        return counter.change if counter is not None else 0

    def get(self, txn: lmdb.Transaction, fact_id: str) -> Fact | None:
        key = fact_id.encode()
        raw = txn.get(key, db=self.facts.handle)
        return None if raw is None else decode_fact(raw, database=FACTS, key=key)

    def put(self, txn: lmdb.Transaction, fact: Fact, entry: Change, *, change: int) -> None:
        txn.put(fact.id.encode(), encode_fact(fact), db=self.facts.handle)
        prefix = fact.id.encode() + b"\0"
        self.history.put(txn, prefix + _SEQUENCE.pack(self._next_sequence(txn, prefix)), entry)
        self.meta.put(txn, _CHANGE_KEY, ChangeCounter(change=change))

    def _next_sequence(self, txn: lmdb.Transaction, prefix: bytes) -> int:
        """One past the fact's last history entry, found by its key alone."""
        cursor = txn.cursor(db=self.history.table.handle)
        found = cursor.prev() if cursor.set_range(prefix + _LAST_SEQUENCE) else cursor.last()
        key = bytes(cursor.key()) if found else b""
        if not (key.startswith(prefix) and len(key) == len(prefix) + _SEQUENCE.size):
            return 0
        return int(_SEQUENCE.unpack(key[len(prefix):])[0]) + 1

    def delete(self, txn: lmdb.Transaction, fact_id: str, *, change: int) -> None:
        """The fact and its history: a forgotten fact leaves nothing behind."""
        self.facts.delete(txn, fact_id.encode())
        prefix = fact_id.encode() + b"\0"
        for key in [key for key, _ in self.history.table.items(txn, prefix=prefix)]:
            self.history.delete(txn, key)
        self.meta.put(txn, _CHANGE_KEY, ChangeCounter(change=change))

    def history_of(self, txn: lmdb.Transaction, fact_id: str) -> list[Change]:
        return [entry for _, entry in self.history.items(txn, prefix=fact_id.encode() + b"\0")]


class FactBook:
    """Every fact, by id, by merge key and by tag; ranked for the startup
    context (``enact.memory.ranking``); counts by state."""

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._by_id: dict[str, Fact] = {fact.id: fact for fact in facts}
        self.states: Counter[FactState] = Counter(fact.state for fact in self._by_id.values())
        # Made when first asked for (a daemon starts without waiting for
        # them; ``warm`` makes them all), then kept through every change.
        self._by_key: dict[str, str] | None = None
        self._by_tag: dict[str, set[str]] | None = None
        self._ranking: StartupRanking | None = None

    def warm(self) -> None:
        """Make every lookup now, rather than on the first question."""
        with collector_paused():
            _ = self.keys, self.by_tag, self.ranking

    @property
    def keys(self) -> dict[str, str]:
        """Merge key → the id of the fact with that text."""
        if self._by_key is None:
            self._by_key = {merge_key(fact.text): fact.id for fact in self._by_id.values()}
        return self._by_key

    @property
    def ranking(self) -> StartupRanking:
        if self._ranking is None:
            self._ranking = StartupRanking(self._by_id.values())
        return self._ranking

    @property
    def by_tag(self) -> dict[str, set[str]]:
        """Tag → the ids of the facts carrying it."""
        if self._by_tag is None:
            self._by_tag = {}
            for fact in self._by_id.values():
                for tag in fact.tags:
                    self._by_tag.setdefault(tag, set()).add(fact.id)
        return self._by_tag

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._by_id.values())

    def get(self, fact_id: str) -> Fact | None:
        return self._by_id.get(fact_id)

    def by_key(self, key: str) -> Fact | None:
        fact_id = self.keys.get(key)
        return None if fact_id is None else self._by_id[fact_id]

    def put(self, fact: Fact) -> None:
        self.remove(fact.id)
        self._by_id[fact.id] = fact
        self.states[fact.state] += 1
        if self._by_key is not None:
            self._by_key[merge_key(fact.text)] = fact.id
        if self._by_tag is not None:
            for tag in fact.tags:
                self._by_tag.setdefault(tag, set()).add(fact.id)
        if self._ranking is not None:
            self._ranking.add(fact)

    def remove(self, fact_id: str) -> Fact | None:
        fact = self._by_id.pop(fact_id, None)
        if fact is not None:
            self.states[fact.state] -= 1
            if self._by_key is not None:
                self._by_key.pop(merge_key(fact.text), None)
            if self._by_tag is not None:
                for tag in fact.tags:
                    tagged = self._by_tag[tag]
                    tagged.discard(fact_id)
                    if not tagged:
                        del self._by_tag[tag]
            if self._ranking is not None:
                self._ranking.remove(fact_id)
        return fact

    def new_id(self) -> str:
        while True:
            fact_id = f"f-{secrets.token_hex(4)}"
            if fact_id not in self._by_id:
                return fact_id

    def select(self, selector: str) -> Fact | str:
        """The one fact ``selector`` names, or why there is none: an exact id
        wins; then the text it equals once normalised; then the one fact whose
        text contains it or that carries it as a tag. Several matches are
        refused, listing them."""
        exact = self._by_id.get(selector.strip())
        if exact is not None:
            return exact
        wanted = merge_key(selector)
        if not wanted:
            return "refused: give a fact id, or text or a tag that names one fact"
        same = self.by_key(wanted)
        if same is not None:
            return same
        # A substring may fall anywhere in a word, so it is looked for in
        # every stored merge key (no key is recomputed); a tag is looked up.
        matching = {fact_id for key, fact_id in self.keys.items() if wanted in key}
        matching |= self.by_tag.get(slug(selector), set())
        if not matching:
            return NO_MATCH
        if len(matching) == 1:
            return self._by_id[matching.pop()]
        matches = sorted((self._by_id[fact_id] for fact_id in matching), key=lambda fact: (-fact.updated_at, fact.id))
        shown = "; ".join(f"{fact.id} ({_clip(fact.text)})" for fact in matches[:_SHOWN_MATCHES])
        more = f"; and {len(matches) - _SHOWN_MATCHES} more" if len(matches) > _SHOWN_MATCHES else ""
        return f"refused: {len(matches)} facts match, forget one by id: {shown}{more}"

    def listing(self, *, tag: str, origin: str, pending: bool) -> list[Fact]:
        """Most recently updated first."""
        candidates = (self._by_id[fact_id] for fact_id in self.by_tag.get(tag, ())) if tag else self._by_id.values()
        facts = [
            fact for fact in candidates
            if (not tag or tag in fact.tags) and (not origin or fact.origin == origin)
            and (not pending or fact.state is FactState.PENDING)
        ]
        facts.sort(key=lambda fact: -fact.updated_at)
        return facts


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
