"""Group commit inside one actor: its queued writes share one transaction.

A durable LMDB commit costs an fsync (about 1.5 ms here), far more than the
work of most messages. So an actor that writes per message stages each write
with ``WriteBatch.stage`` and the batch commits once its mailbox is empty (or
the batch is full). Whatever must follow the commit — the reply to an ask, a
channel call, a message to another actor — runs in the write's ``after``
callback, in the actor's thread, once the commit is durable. An ask whose
reply waits for the commit is answered with a ``Deferred``, which
``Supervisor.ask`` resolves for the caller: nothing is acknowledged before
it is committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import lmdb

from enact.storage import Store

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BATCH = 128


class Deferred:
    """A reply that is ready once a group commit is durable."""

    def __init__(self) -> None:
        self._future: Future[Any] = Future()

    def resolve(self, value: object) -> None:
        if not self._future.done():
            self._future.set_result(value)

    def fail(self, error: BaseException) -> None:
        """Fail the reply, unless it was answered already."""
        if not self._future.done():
            self._future.set_exception(error)

    @property
    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> Any:
        return self._future.result(timeout=timeout)


@dataclass(slots=True)
class _Staged(Generic[T]):
    write: Callable[[lmdb.Transaction], T]
    after: Callable[[T], None] | None
    failed: Callable[[Exception], None] | None


class WriteBatch:
    def __init__(self, store: Store, *, owner: str) -> None:
        self._store = store
        self._owner = owner
        self._staged: list[_Staged[Any]] = []
        self.callback_errors = 0
        """Callbacks that raised after their commit (the owning actor counts them)."""

    @property
    def pending(self) -> bool:
        return bool(self._staged)

    @property
    def full(self) -> bool:
        return len(self._staged) >= MAX_BATCH

    def stage(
        self,
        write: Callable[[lmdb.Transaction], T],
        after: Callable[[T], None] | None = None,
        *,
        failed: Callable[[Exception], None] | None = None,
    ) -> None:
        """Queue ``write`` for the next commit; ``after(result)`` runs once it
        is durable, ``failed(error)`` if ``write`` raised or the commit failed."""
        self._staged.append(_Staged(write=write, after=after, failed=failed))

    def flush(self) -> None:
        """Commit everything staged, then run the callbacks in order.

        Writes staged by a callback go into the next flush, which follows at
        once, so a chain of effects never waits for another message."""
        while self._staged:
            staged, self._staged = self._staged, []
            try:
                outcomes = self._store.write_each([item.write for item in staged])
            except Exception as error:  # the whole commit failed (fenced, say)
                log.warning("%s: a group commit of %d writes failed: %s", self._owner, len(staged), error)
                for item in staged:
                    self._fail(item, error)
                continue
            for item, outcome in zip(staged, outcomes, strict=True):
                if not outcome.ok:
                    log.error("%s: a write failed and was rolled back: %r", self._owner, outcome.value)
                    self._fail(item, outcome.value)
                elif item.after is not None:
                    self._run_after(item, item.after, outcome.value)

    def abandon(self, error: Exception) -> None:
        """Fail everything staged and not committed: the actor is going away,
        and whoever waits on one of these must hear so at once, not at the end
        of their deadline."""
        staged, self._staged = self._staged, []
        for item in staged:
            self._fail(item, error)

    def _run_after(self, item: _Staged[Any], after: Callable[[Any], None], value: Any) -> None:
        # One callback's defect must not cost the others theirs, nor leave
        # its own waiter hanging: the write is committed, the callback's
        # failure is logged, counted and handed to its failure path.
        try:
            after(value)
        except Exception as error:
            self.callback_errors += 1
            log.exception("%s: a callback after a committed write failed", self._owner)
            self._fail(item, error)

    def _fail(self, item: _Staged[Any], error: Exception) -> None:
        if item.failed is None:
            return
        try:
            item.failed(error)
        except Exception:
            self.callback_errors += 1
            log.exception("%s: a failure callback failed", self._owner)
