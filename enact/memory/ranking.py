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
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator

from enact.memory.facts import Fact, FactState, Sensitivity

_LINE = "- {text} ({type}, {confidence} confidence; {id})\n"
_LINE_OVERHEAD = len(_LINE.format(text="", type="", confidence="", id=""))


def fact_line(fact: Fact) -> str:
    """How a fact is shown to the model."""
    return _LINE.format(text=fact.text, type=fact.type.value, confidence=fact.confidence.value, id=fact.id)


def line_length(fact: Fact) -> int:
    """``len(fact_line(fact))`` without making the line (the enums are str)."""
    return len(fact.text) + len(fact.type) + len(fact.confidence) + len(fact.id) + _LINE_OVERHEAD


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


class StartupRanking:
    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._buckets: dict[_Bucket, list[_Item]] = {}
        self._where: dict[str, tuple[_Bucket, _Item]] = {}
        # ``add`` without its removal and bisection, and with ``may_start``,
        # ``rank_item`` and ``line_length`` written out: this runs once per
        # fact when a memory of 100,000 facts loads.
        active, secret, private, overhead = FactState.ACTIVE, Sensitivity.SECRET, Sensitivity.PRIVATE, _LINE_OVERHEAD
        buckets, where = self._buckets, self._where
        for fact in facts:
            if fact.state is not active or fact.sensitivity is secret:
                continue
            bucket = (fact.sensitivity is private,
                      len(fact.text) + len(fact.type) + len(fact.confidence) + len(fact.id) + overhead)
            item = (-fact.confidence.rank, -fact.updated_at, fact.id, fact)
            items = buckets.get(bucket)
            if items is None:
                buckets[bucket] = [item]
            else:
                items.append(item)
            where[fact.id] = (bucket, item)
        for items in buckets.values():
            items.sort()

    def __len__(self) -> int:
        return len(self._where)

    def add(self, fact: Fact) -> None:
        """Add or replace ``fact`` (a fact that may not start is only removed)."""
        self.remove(fact.id)
        if not may_start(fact):
            return
        bucket = (fact.sensitivity is Sensitivity.PRIVATE, line_length(fact))
        item = rank_item(fact)
        insort(self._buckets.setdefault(bucket, []), item)
        self._where[fact.id] = (bucket, item)

    def remove(self, fact_id: str) -> None:
        where = self._where.pop(fact_id, None)
        if where is None:
            return
        bucket, item = where
        items = self._buckets[bucket]
        del items[bisect_left(items, item)]
        if not items:
            del self._buckets[bucket]

    def select(self, budget: int, *, send_private: bool) -> tuple[list[Fact], int]:
        """The facts chosen, best first, and the budget left."""
        heads = [
            (items[0], length, 0, items)
            for (private, length), items in self._buckets.items()
            if length <= budget and (send_private or not private)
        ]
        heapq.heapify(heads)
        chosen: list[Fact] = []
        while heads:
            item, length, position, items = heads[0]
            if length > budget:
                heapq.heappop(heads)  # nothing this long fits any more
                continue
            chosen.append(item[3])
            budget -= length
            position += 1
            if position < len(items):
                heapq.heapreplace(heads, (items[position], length, position, items))
            else:
                heapq.heappop(heads)
        return chosen, budget

    def ranked(self, *, send_private: bool) -> Iterator[tuple[int, Fact]]:
        """Every fact that may start, by length then rank, with its line length."""
        for (private, length), items in sorted(self._buckets.items()):
            if send_private or not private:
                for item in items:
                    yield length, item[3]
