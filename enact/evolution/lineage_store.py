"""The lineage inbox's tables: ``evolution.lineage`` (key: the entry id)
and ``evolution.lineage_state`` (the last assessed parent revision, and a
rewritten history already reported). A scan's entries and the revision it
moves to are committed together: a scan records all of its changes or none."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import lmdb

from enact.messages.lineage import LineageEntry, LineageState
from enact.storage import RecordTable, Store

ENTRIES = "evolution.lineage"
STATE = "evolution.lineage_state"
DATABASES = (ENTRIES, STATE)
_REVISION = b"revision"
_REWRITTEN = b"rewritten"


def entry_id(commit: str) -> str:
    return f"lin-{commit[:12]}"


class LineageTables:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._entries = RecordTable(store.table(ENTRIES), LineageEntry)
        self._state = store.table(STATE)

    def revision(self) -> str:
        """The last assessed revision ("" before the first scan)."""
        stored = self.store.read(lambda txn: self._state.get(txn, _REVISION))
        return str(stored["revision"]) if stored else ""

    def rewritten(self) -> str:
        """The head at which a rewritten history was reported, or ""."""
        stored = self.store.read(lambda txn: self._state.get(txn, _REWRITTEN))
        return str(stored["head"]) if stored else ""

    def note_rewritten(self, head: str) -> bool:
        """Record it; whether it is new (not reported before)."""

        def write(txn: lmdb.Transaction) -> bool:
            if self._state.get(txn, _REWRITTEN):
                return False
            self._state.put(txn, _REWRITTEN, {"head": head})
            return True

        return self.store.write(write)

    def move_to(self, revision: str, now: float, entries: Sequence[LineageEntry] = ()) -> None:
        """Record ``entries`` and ``revision`` as the last assessed one, in one commit."""

        def write(txn: lmdb.Transaction) -> None:
            for entry in entries:
                if self._entries.get(txn, entry.id.encode()) is None:
                    self._entries.put(txn, entry.id.encode(), entry)
            self._state.put(txn, _REVISION, {"revision": revision, "at": now})
            self._state.delete(txn, _REWRITTEN)

        self.store.write(write)

    def next_sequence(self) -> int:
        return 1 + max((entry.sequence for entry in self.entries()), default=0)

    def entries(self, state: LineageState | None = None) -> list[LineageEntry]:
        found = self.store.read(lambda txn: [entry for _, entry in self._entries.items(txn)])
        return sorted((e for e in found if state is None or e.state is state), key=lambda e: e.sequence)

    def entry(self, entry_id: str) -> LineageEntry | None:
        if not entry_id or len(entry_id) > 64:
            return None
        return self.store.read(lambda txn: self._entries.get(txn, entry_id.encode()))

    def update(self, entry_id: str, now: float, *, only_from: frozenset[LineageState],
               **change: object) -> LineageEntry | None:
        """The entry changed, when it is in one of ``only_from``; else as it was (None: unknown)."""

        def write(txn: lmdb.Transaction) -> LineageEntry | None:
            found = self._entries.get(txn, entry_id.encode())
            if found is None or found.state not in only_from:
                return found
            changed = dataclasses.replace(found, updated_at=now, **change)  # type: ignore[arg-type]
            self._entries.put(txn, entry_id.encode(), changed)
            return changed

        return self.store.write(write)
