"""Tokens spent per local day and purpose, in ``runtime.spending``.

Key ``YYYY-MM-DD/<purpose>``; the value sums the calls of that day and
purpose. Writes are grouped per commit; the totals read from memory, so a
tally asked for right after a call already holds it."""

from __future__ import annotations

from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import WriteBatch
from enact.messages.accounting import PurposeSpending, Spend, Spending, SpentOn
from enact.messages.common import Done
from enact.storage import Document

DATABASE = "runtime.spending"

_COUNTS = ("calls", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


class AccountingActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._table = self._store.table(DATABASE)
        self._totals: dict[str, Document] = {}
        """Every day's totals read or written since start, by key."""
        # Idle, everything in _totals is committed: read the table instead.
        self.idle_reads.declare(SpentOn, lambda message: self._committed_spending(message.day))

    def handle(self, message: Any) -> Any:
        match message:
            case Spend():
                return self._spend(message)
            case SpentOn():
                return self._spent_on(message.day)
        return super().handle(message)

    def _load(self, key: str) -> Document | None:
        if key not in self._totals:
            found = self._store.read(lambda txn: self._table.get(txn, key.encode()))
            if found is None:
                return None
            self._totals[key] = dict(found)
        return self._totals[key]

    def _spend(self, message: Spend) -> Done:
        key = f"{message.day}/{message.purpose}"
        totals = self._load(key) or {name: 0 for name in _COUNTS} | {"cost_usd": None}
        totals["calls"] += 1
        for name in _COUNTS[1:]:
            totals[name] += getattr(message, name)
        if message.cost_usd is not None:
            totals["cost_usd"] = (totals["cost_usd"] or 0.0) + message.cost_usd
        self._totals[key] = totals
        snapshot = dict(totals)

        def write(txn: lmdb.Transaction) -> None:
            self._table.put(txn, key.encode(), snapshot)

        self._batch.stage(write, told=True)  # a tally nobody waits for: it may ride another actor's commit
        return Done()

    def _spent_on(self, day: str) -> Spending:
        prefix = f"{day}/".encode()

        def keys(txn: lmdb.Transaction) -> list[str]:
            return [key.decode() for key, _ in self._table.items(txn, prefix=prefix)]

        for key in self._store.read(keys):
            self._load(key)
        purposes = [
            PurposeSpending(purpose=key.partition("/")[2], **totals)
            for key, totals in sorted(self._totals.items())
            if key.startswith(f"{day}/")
        ]
        return Spending(day=day, purposes=tuple(purposes))

    def _committed_spending(self, day: str) -> Spending:
        """What ``_spent_on`` answers, from the committed table alone (no
        ``_totals``, which this actor's thread changes): an idle read."""
        prefix = f"{day}/".encode()

        def read(txn: lmdb.Transaction) -> list[PurposeSpending]:
            return [PurposeSpending(purpose=key.decode().partition("/")[2], **totals)
                    for key, totals in self._table.items(txn, prefix=prefix)]

        return Spending(day=day, purposes=tuple(self._store.read(read)))
