"""An actor's view of the home's storage: its own databases and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import lmdb

from enact.storage._committer import Offered, WriteOutcome, apply_each
from enact.storage._errors import OwnershipError
from enact.storage._records import AppendLog, Table
from enact.storage._tiers import TieredLog, TieredTable, older_tier

if TYPE_CHECKING:
    from enact.storage._environment import Storage

T = TypeVar("T")


class Store:
    """One actor's view of storage: its own databases and nothing else."""

    def __init__(self, storage: Storage, owner: str, handles: dict[str, lmdb._Database]) -> None:
        self._storage = storage
        self.owner = owner
        self._handles = handles

    def handle(self, name: str) -> lmdb._Database:
        try:
            return self._handles[name]
        except KeyError:
            raise OwnershipError(f"{self.owner} does not own database {name!r}") from None

    def table(self, name: str, *, version: int = 1) -> Table:
        return Table(name, self.handle(name), version=version)

    def log(self, name: str, *, version: int = 1) -> AppendLog:
        return AppendLog(name, self.handle(name), version=version)

    def tiered_table(self, name: str, *, version: int = 1) -> TieredTable:
        """``name`` kept in two trees (``enact.storage._tiers``); the owner is granted both."""
        return TieredTable(name, self.handle(name), self.handle(older_tier(name)), version=version)

    def tiered_log(self, name: str, *, version: int = 1) -> TieredLog:
        return TieredLog(name, self.handle(name), self.handle(older_tier(name)), version=version)

    def read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        return self._storage._read(fn)

    def write(self, fn: Callable[[lmdb.Transaction], T], *, fenced: bool = True) -> T:
        """Run ``fn`` in one durable write transaction; committed on return.

        Fenced writes fail with the guard's error once another daemon owns
        the home, inside the same transaction, so no stale write can land.
        """
        return self._storage._write(fn, guarded=fenced)

    def copy_to(self, directory: Path) -> None:
        """The whole environment copied (``Storage.copy_to``): a backup reads
        every database, not only this owner's."""
        self._storage.copy_to(directory)

    def write_each(self, fns: Sequence[Callable[[lmdb.Transaction], Any]]) -> list[WriteOutcome]:
        """Group commit: run each ``fn`` in its own nested transaction of one
        fenced write transaction, and commit once, together with the batches
        other actors flush meanwhile (``Storage.committer``). A ``fn`` that
        raises is rolled back alone; the others still commit. Returns, in
        order, each result or the exception it raised."""
        storage = self._storage
        if storage.committer is not None:
            return storage.committer.commit(fns)
        return storage._write(lambda txn: apply_each(storage._env, txn, fns), guarded=True)

    def offer(self, fns: Sequence[Callable[[lmdb.Transaction], Any]]) -> Offered | None:
        """``write_each`` without waiting, for writes nobody waits for: they
        go into the next group commit (``GroupCommitter.offer``); None when
        group commit is off (then commit them with ``write_each``)."""
        committer = self._storage.committer
        return committer.offer(fns) if committer is not None else None
