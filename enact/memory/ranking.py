"""The startup context's ranking, kept as facts change rather than sorted per
session.

Facts that may go into the startup context (active, not secret) are held in
buckets by line length and by whether they are
private, each bucket a list in rank order: confidence high first, then most
recently updated (the id breaks ties, so the order is total). A write moves
one fact in one bucket (a bisection).

The selection is the greedy walk in rank order that skips a fact that does
not fit and still considers smaller ones after it. Within a bucket every
fact is as long as the others, so the best fact that still fits is always
the head of some bucket within the budget: a heap over the heads finds it,
and a bucket whose length is over the remaining budget is dropped whole.
The cost follows the number of distinct lengths and of facts chosen, never
the number of facts.

The walk (``choose``) serves two keepers of the buckets: ``StartupRanking``
here, in memory, for a set of facts given at once; and the Memory actor's
lookups in LMDB (``enact.memory.lookups``), which hold no fact in memory.
Both also say which facts are withheld whatever the budget (pending, secret),
so that every fact gets a decision when one is explained.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

from enact.memory.facts import Fact, FactState, Sensitivity

_LINE = "- {text} ({type}, {confidence} confidence; {id})\n"
_LINE_OVERHEAD = len(_LINE.format(text="", type="", confidence="", id=""))


def fact_line(fact: Fact) -> str:
    """How a fact is shown to the model."""
    return _LINE.format(text=fact.text, type=fact.type.value, confidence=fact.confidence.value, id=fact.id)


def line_length(fact: Fact) -> int:
    """``len(fact_line(fact))`` without making the line (the enums are str)."""
    return len(fact.text) + len(fact.type) + len(fact.confidence) + len(fact.id) + _LINE_OVERHEAD


Item = TypeVar("Item")
_Item = tuple[int, float, str, Fact]
"""(minus the confidence rank, minus the update time, id, the fact): sorts best first."""
_Bucket = tuple[bool, int]
"""(private, line length)"""


def rank_item(fact: Fact) -> _Item:
    return (-fact.confidence.rank, -fact.updated_at, fact.id, fact)


def may_start(fact: Fact) -> bool:
    """Whether a fact can go into a startup context at all (private ones only
    when the settings allow: decided at selection)."""
    return fact.state is FactState.ACTIVE and fact.sensitivity is not Sensitivity.SECRET


class Ranking(Protocol):
    """The startup context's ranking, however it is kept."""

    def select(self, budget: int, *, send_private: bool) -> tuple[list[Fact], int]:
        """The facts chosen, best first, and the budget left."""
        ...

    def ranked(self, *, private: bool) -> Iterator[tuple[int, Fact]]:
        """The facts of ``private`` that may start, by length then rank, with
        their line length, each read when asked for."""
        ...

    def withheld(self) -> Iterator[Fact]:
        """The facts that never start: pending, and active secret ones."""
        ...

    @property
    def total(self) -> int:
        """Every fact: ranked or withheld."""
        ...


def choose(buckets: Iterable[tuple[int, Iterator[Item]]], budget: int) -> tuple[list[Item], int]:
    """The greedy walk in rank order over ``buckets`` (each a line length and
    its items best first; items of all buckets compare by rank), skipping
    what does not fit: the items chosen, best first, and the budget left."""
    heads = []
    for order, (length, items) in enumerate(buckets):
        first = next(items, None)
        if length <= budget and first is not None:
            heads.append((first, order, length, items))
    heapq.heapify(heads)
    chosen: list[Item] = []
    while heads:
        item, order, length, items = heads[0]
        if length > budget:
            heapq.heappop(heads)  # nothing this long fits any more
            continue
        chosen.append(item)
        budget -= length
        following = next(items, None)
        if following is not None:
            heapq.heapreplace(heads, (following, order, length, items))
        else:
            heapq.heappop(heads)
    return chosen, budget


class StartupRanking:
    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._buckets: dict[_Bucket, list[_Item]] = {}
        self._where: dict[str, tuple[_Bucket, _Item]] = {}
        self._withheld: dict[str, Fact] = {}
        for fact in facts:
            if not may_start(fact):
                self._withheld[fact.id] = fact
                continue
            bucket = (fact.sensitivity is Sensitivity.PRIVATE, line_length(fact))
            item = rank_item(fact)
            self._buckets.setdefault(bucket, []).append(item)
            self._where[fact.id] = (bucket, item)
        for items in self._buckets.values():
            items.sort()

    def __len__(self) -> int:
        return len(self._where)

    @property
    def total(self) -> int:
        return len(self._where) + len(self._withheld)

    def add(self, fact: Fact) -> None:
        """Add or replace ``fact``."""
        self.remove(fact.id)
        if not may_start(fact):
            self._withheld[fact.id] = fact
            return
        bucket = (fact.sensitivity is Sensitivity.PRIVATE, line_length(fact))
        item = rank_item(fact)
        insort(self._buckets.setdefault(bucket, []), item)
        self._where[fact.id] = (bucket, item)

    def remove(self, fact_id: str) -> None:
        self._withheld.pop(fact_id, None)
        where = self._where.pop(fact_id, None)
        if where is None:
            return
        bucket, item = where
        items = self._buckets[bucket]
        del items[bisect_left(items, item)]
        if not items:
            del self._buckets[bucket]

    def select(self, budget: int, *, send_private: bool) -> tuple[list[Fact], int]:
        buckets = [(length, iter(items)) for (private, length), items in self._buckets.items()
                   if send_private or not private]
        chosen, left = choose(buckets, budget)
        return [item[3] for item in chosen], left

    def ranked(self, *, private: bool) -> Iterator[tuple[int, Fact]]:
        for (in_private, length), items in sorted(self._buckets.items()):
            if in_private is private:
                for item in items:
                    yield length, item[3]

    def withheld(self) -> Iterator[Fact]:
        return iter(list(self._withheld.values()))
