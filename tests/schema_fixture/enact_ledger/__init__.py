"""A third-party component keeping one database, ``ledger.entries``, whose
records changed layout: version 1 stores ``{"text"}``, version 2 also its
word count, ``{"text", "words"}``.

Which version it declares is read from ``LEDGER_SCHEMA_VERSION``: 1 by
default, as the previous release wrote it (and as an enact older than a
migrated home reads it), or 2 with its migration. ``LEDGER_MIGRATION=fail``
makes the step from 1 to 2 raise halfway through, after it has rewritten a
record, so the tests see that nothing of it stays.
Nothing here imports what the previous release did not have until asked
(``schemas`` is only called by an enact that reads versions).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lmdb
import orjson

from enact.actors._base import ActorContext, EnactActor, UnknownMessage
from enact.actors.supervisor import ActorSpec
from enact.components import Component, DaemonParts
from enact.messages import Request, reply, request

if TYPE_CHECKING:
    from enact.storage import DatabaseSchema

ENTRIES = "ledger.entries"


@request("ledger.Add")
@dataclass(frozen=True, slots=True, kw_only=True)
class Add(Request["Entries"]):
    """Add one entry to the ledger."""

    text: str


@request("ledger.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["Entries"]):
    """The ledger's entries, as stored (the version of each record with it)."""


@reply("ledger.Entries")
@dataclass(frozen=True, slots=True, kw_only=True)
class Entries:
    entries: tuple[str, ...]
    """Each record's JSON as stored."""


def _declared_version() -> int:
    return int(os.environ.get("LEDGER_SCHEMA_VERSION", "1"))


class LedgerActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._table = self._store.table(ENTRIES, version=_declared_version())

    def handle(self, message: Any) -> Any:
        match message:
            case Add(text=text):
                def add(txn: lmdb.Transaction) -> None:
                    key = b"%08d" % self._table.count(txn)
                    words = {"words": len(text.split())} if _declared_version() >= 2 else {}
                    self._table.put(txn, key, {"text": text, **words})

                self._store.write(add)
                return self._list()
            case List():
                return self._list()
        raise UnknownMessage(self.context.name, message)

    def _list(self) -> Entries:
        handle = self._store.handle(ENTRIES)
        return Entries(entries=self._store.read(
            lambda txn: tuple(bytes(raw).decode() for _, raw in txn.cursor(db=handle))))


def count_words(txn: lmdb.Transaction, entries: lmdb._Database) -> None:
    """Version 1 to 2: every entry gains its word count."""
    failing = os.environ.get("LEDGER_MIGRATION") == "fail"
    for key, raw in list(txn.cursor(db=entries)):
        document = orjson.loads(raw)
        document.update(words=len(document["text"].split()), v=2)
        txn.put(bytes(key), orjson.dumps(document), db=entries)
        if failing:
            raise ValueError(f"entry {bytes(key).decode()} cannot be counted")


class LedgerComponent(Component):
    name = "ledger"

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        return [ActorSpec(name="ledger", actor=LedgerActor, databases=(ENTRIES,), depends_on=("epoch",))]

    def schemas(self) -> Sequence[DatabaseSchema]:
        from enact.storage import DatabaseSchema

        version = _declared_version()
        return [DatabaseSchema(ENTRIES, version=version, migrations={1: count_words} if version >= 2 else {})]
