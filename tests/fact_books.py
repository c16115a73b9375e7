"""Fact books on real LMDB in a temporary directory, for the tests of the
rules that read facts (the Memory actor's ``FactBook`` holds none in memory)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from enact.memory.book import DATABASES, FactBook
from enact.memory.facts import Fact
from enact.messages.memory import Change
from enact.storage import Storage

_ENTRY = Change(at=0.0, change="created", origin="human-cli")


class FactBooks:
    """Makes books, each in its own environment, and closes them all."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._opened: list[Storage] = []

    def __call__(self, facts: Iterable[Fact] = ()) -> FactBook:
        storage = Storage(self._directory / f"book-{len(self._opened)}", map_size=1 << 24)
        self._opened.append(storage)
        book = FactBook(storage.grant("memory", DATABASES))
        for fact in facts:
            put(book, fact)
        return book

    def close(self) -> None:
        for storage in self._opened:
            storage.close()


def put(book: FactBook, fact: Fact) -> None:
    """Write ``fact`` as the Memory actor commits it."""
    records = book.records
    book.store.write(lambda txn: records.put(txn, fact, _ENTRY, change=records.change(txn) + 1), fenced=False)


def remove(book: FactBook, fact_id: str) -> None:
    records = book.records
    book.store.write(lambda txn: records.delete(txn, fact_id, change=records.change(txn) + 1), fenced=False)
