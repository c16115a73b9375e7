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

Writes nobody waits for (a told tally, a session's mapping) need not pay
for a commit of their own: ``offer`` queues them without waiting, and the
next commit that any caller leads carries them. When none comes within
``OFFER_WAIT_S``, the committer's own thread leads one, so an offered write
is durable within a few milliseconds either way; its owner learns so by
looking (``Offered.done``), in its own thread, with no message.

Inside the shared transaction the fence guard runs first (``Storage._write``
with ``guarded=True``: a superseded daemon lands nothing), then each write in
a nested transaction of its own, so a write that raises is rolled back alone
and fails only its own caller; the others commit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import lmdb

from enact.frozen_dataclass import dataclass
from enact.storage._errors import GroupInterrupted

Write = Callable[[lmdb.Transaction], Any]

OFFER_WAIT_S = 0.005
"""How long offered writes wait for another caller's commit before the
committer's thread commits them: far less than anyone notices, far more
than the gap between two commits of a busy daemon."""
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


class Offered:
    """One caller's writes, waiting for the commit that carries them
    (``offer``: read ``done`` then ``result``; ``commit`` waits for it)."""

    __slots__ = ("error", "fns", "offered_at", "outcomes")

    def __init__(self, fns: Sequence[Write], offered_at: float = 0.0) -> None:
        self.fns = fns
        self.outcomes: list[WriteOutcome] | None = None
        self.error: BaseException | None = None
        self.offered_at = offered_at

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
        self._watching = 0
        """Callers of ``until_waiting`` (tests): ``_queued`` is told only while there are some."""
        self._waiting: list[Offered] = []
        self._offered: list[Offered] = []
        """Offered batches no commit has taken yet: the next one carries them."""
        self._offers = threading.Condition(lock)
        """Told of each offer, for the committer's own thread."""
        self._offer_thread: threading.Thread | None = None
        self._closed = False
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
            self._watching += 1
            try:
                return self._queued.wait_for(lambda: len(self._waiting) == count, timeout)
            finally:
                self._watching -= 1

    def commit(self, fns: Sequence[Write]) -> list[WriteOutcome]:
        """Commit ``fns`` durably, together with whatever other callers have
        ready; returns each one's result or exception, in order. Raises what
        failed the whole transaction (the fence, a full disk)."""
        batch = Offered(fns)
        with self._condition:
            if fns:
                self._waiting.append(batch)
                if self._watching:
                    self._queued.notify_all()
            while self._leading and not batch.done:
                self._condition.wait()
            if batch.done:  # carried by another caller's commit
                return batch.result()
            if not fns and not self._offered:
                return []  # nothing to wait for: what was offered before is durable (or failed, each batch says)
            group = self._take()
        self._lead(group)
        return batch.result() if fns else []

    def _take(self) -> list[Offered]:
        """Become the leader and take what waits (called holding the lock)."""
        self._leading = True
        group = self._offered + self._waiting  # offered first: each was offered before its owner waited
        self._offered, self._waiting = [], []
        return group

    def _lead(self, group: list[Offered]) -> None:
        try:
            self._commit_group(group)
        finally:
            with self._condition:
                self._leading = False
                self._condition.notify_all()

    def offer(self, fns: Sequence[Write]) -> Offered:
        """Queue ``fns`` for the next commit, without waiting for it (see the
        module's docstring); what it returns says when they are durable."""
        batch = Offered(fns, time.monotonic())
        with self._condition:
            if self._closed:
                raise RuntimeError("writes offered after the storage closed")
            self._offered.append(batch)
            if self._offer_thread is None:
                self._offer_thread = threading.Thread(target=self._commit_offered, name="enact-offered-writes",
                                                      daemon=True)
                self._offer_thread.start()
            elif len(self._offered) == 1:
                self._offers.notify()
        return batch

    def _commit_offered(self) -> None:
        """The committer's own thread: leads a commit for offered writes that
        no other caller's commit took within ``OFFER_WAIT_S``."""
        while True:
            with self._condition:
                while not self._offered and not self._closed:
                    self._offers.wait()
                if self._closed:
                    return
                wait = self._offered[0].offered_at + OFFER_WAIT_S - time.monotonic()
                if wait > 0:
                    self._offers.wait(wait)
                    continue  # taken meanwhile, or due now
                while self._leading:
                    self._condition.wait()
                if not self._offered:
                    continue  # the commit that just ended carried them
                group = self._take()
            self._lead(group)  # a failure is each batch's, told to its owner

    def close(self) -> None:
        """Commit what is still offered and stop the committer's thread."""
        with self._condition:
            pending = bool(self._offered)
        if pending:
            with contextlib.suppress(Exception):  # a failure is each offered batch's, its owner's to hear
                self.commit(())
        with self._condition:
            self._closed = True
            self._offers.notify_all()
        thread = self._offer_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _commit_group(self, group: list[Offered]) -> None:
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
