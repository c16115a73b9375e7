"""One durable commit for the writes every actor has ready.

LMDB runs one write transaction at a time per environment and each durable
commit costs an fsync. When several actors flush their write batches at
once, each used to wait for the others' commits and then pay for its own.
The group committer merges them: the first thread to arrive leads, and
every batch that arrives while the leader's commit is in flight waits and
goes into the next commit, which one of the waiting threads leads. A caller
still blocks until its own writes are durable, so what follows the commit
(the ``after`` callbacks of ``enact.actors._batching``) runs in the owning
actor's thread as before; there is no extra thread and no hand-off when
only one actor writes.

Inside the shared transaction the fence guard runs first (``Storage._write``
with ``guarded=True``: a superseded daemon lands nothing), then each write in
a nested transaction of its own, so a write that raises is rolled back alone
and fails only its own caller; the others commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import lmdb

from enact.storage._errors import GroupInterrupted

Write = Callable[[lmdb.Transaction], Any]
RunInTransaction = Callable[[Callable[[lmdb.Transaction], Any]], Any]
"""Runs a function in one fenced, durable write transaction (retried whole
when the map grows) and returns its result."""


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """One function's share of a group commit: its result, or what it raised."""

    ok: bool
    value: Any


def apply_each(env: lmdb.Environment, txn: lmdb.Transaction, fns: Sequence[Write]) -> list[WriteOutcome]:
    """Run each ``fn`` in its own nested transaction of ``txn``: one that
    raises is rolled back alone. A full or resized map aborts the whole
    transaction, which is retried once the map has grown."""
    outcomes: list[WriteOutcome] = []
    for fn in fns:
        child = lmdb.Transaction(env, write=True, parent=txn)
        try:
            result = fn(child)
        except (lmdb.MapFullError, lmdb.MapResizedError):
            child.abort()
            raise
        except Exception as error:
            child.abort()
            outcomes.append(WriteOutcome(ok=False, value=error))
        else:
            child.commit()
            outcomes.append(WriteOutcome(ok=True, value=result))
    return outcomes


class _Batch:
    """One caller's writes, waiting for the commit that carries them."""

    __slots__ = ("error", "fns", "outcomes")

    def __init__(self, fns: Sequence[Write]) -> None:
        self.fns = fns
        self.outcomes: list[WriteOutcome] | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.outcomes is not None or self.error is not None

    def result(self) -> list[WriteOutcome]:
        if self.error is not None:
            raise self.error
        if self.outcomes is None:
            raise RuntimeError("a group commit batch was read before its commit ended")
        return self.outcomes


class GroupCommitter:
    """Merges concurrent ``commit`` calls on one environment into one
    durable transaction each round (leader and followers)."""

    def __init__(self, env: lmdb.Environment, run: RunInTransaction) -> None:
        self._env = env
        self._run = run
        lock = threading.Lock()
        self._condition = threading.Condition(lock)
        """Callers wait on it for the commit that carries their batch."""
        self._queued = threading.Condition(lock)
        """Told of each batch queued, for ``until_waiting``: its own, so no caller wakes for it."""
        self._waiting: list[_Batch] = []
        self._leading = False
        self.commits = 0
        """Shared transactions run, failed ones included (the benchmark reads it)."""
        self.batches = 0
        """Callers' batches they carried."""

    def until_waiting(self, count: int, timeout: float) -> bool:
        """Block until ``count`` batches wait for the next commit (a test
        holding a commit open knows then that the others have queued);
        False if they did not within ``timeout`` seconds."""
        with self._condition:
            return self._queued.wait_for(lambda: len(self._waiting) == count, timeout)

    def commit(self, fns: Sequence[Write]) -> list[WriteOutcome]:
        """Commit ``fns`` durably, together with whatever other callers have
        ready; returns each one's result or exception, in order. Raises what
        failed the whole transaction (the fence, a full disk)."""
        batch = _Batch(fns)
        with self._condition:
            self._waiting.append(batch)
            self._queued.notify_all()
            while self._leading and not batch.done:
                self._condition.wait()
            if batch.done:  # carried by another caller's commit
                return batch.result()
            self._leading = True
            group, self._waiting = self._waiting, []
        try:
            self._commit_group(group)
        finally:
            with self._condition:
                self._leading = False
                self._condition.notify_all()
        return batch.result()

    def _commit_group(self, group: list[_Batch]) -> None:
        def apply(txn: lmdb.Transaction) -> list[list[WriteOutcome]]:
            return [apply_each(self._env, txn, batch.fns) for batch in group]

        try:
            results: list[list[WriteOutcome]] = self._run(apply)
        except Exception as error:
            for batch in group:
                batch.error = error
            return
        except BaseException as error:
            # Raised on in the thread that ran it (this leader's); every
            # caller of the group hears its commit was cut short, as a plain
            # error its write batch handles, not an interrupt of its own.
            for batch in group:
                batch.error = GroupInterrupted(f"the shared commit was interrupted: {error!r}")
            raise
        finally:
            self.commits += 1
            self.batches += len(group)
        for batch, outcomes in zip(group, results, strict=True):
            batch.outcomes = outcomes
