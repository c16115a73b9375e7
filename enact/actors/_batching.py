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

A write that nobody waits for (``stage(..., told=True)``: the write of a
told message, a tally, a session's mapping) need not cost a commit of its
own: when everything staged is such a write, the batch offers it to the next
group commit any actor leads (``Store.offer``) instead of committing, and
runs its callbacks once that commit is durable, at its actor's next message
(``settle``) or its next ``flush``. ``flush`` itself always commits what is
staged and waits for what was offered: a read after it sees every write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import lmdb

from enact.actors._reply import Reply
from enact.storage import Store
from enact.storage._committer import Offered, WriteOutcome

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BATCH = 128


class Deferred:
    """A reply that is ready once a group commit is durable."""

    __slots__ = ("_reply",)

    def __init__(self) -> None:
        self._reply = Reply()

    def resolve(self, value: object) -> None:
        self._reply.set(value)  # unless it was answered already

    def fail(self, error: BaseException) -> None:
        """Fail the reply, unless it was answered already."""
        self._reply.set_exception((type(error), error, error.__traceback__))

    @property
    def done(self) -> bool:
        return self._reply.done

    def wait(self, timeout: float | None = None) -> Any:
        """The reply; raises what failed it, or ``TimeoutError`` (``ReplyTimeout``)."""
        return self._reply.get(timeout=timeout)


@dataclass(slots=True)
class _Staged(Generic[T]):
    write: Callable[[lmdb.Transaction], T]
    after: Callable[[T], None] | None
    failed: Callable[[Exception], None] | None
    told: bool = False


class WriteBatch:
    def __init__(self, store: Store, *, owner: str) -> None:
        self._store = store
        self._owner = owner
        self._staged: list[_Staged[Any]] = []
        self.offered: list[tuple[list[_Staged[Any]], Offered]] = []
        """Offered to the next group commit, in order, callbacks not yet run."""
        self.callback_errors = 0
        """Callbacks that raised after their commit (the owning actor counts them)."""

    @property
    def pending(self) -> bool:
        return bool(self._staged)

    @property
    def busy(self) -> bool:
        """Something staged, or offered and not yet durable: LMDB does not
        yet hold every write of this batch's owner."""
        # Asked by every idle read (a status's spending on every request): no generator made when none is offered.
        return bool(self._staged) or (bool(self.offered) and any(not offered.done for _, offered in self.offered))

    @property
    def full(self) -> bool:
        return len(self._staged) >= MAX_BATCH

    def stage(
        self,
        write: Callable[[lmdb.Transaction], T],
        after: Callable[[T], None] | None = None,
        *,
        failed: Callable[[Exception], None] | None = None,
        told: bool = False,
    ) -> None:
        """Queue ``write`` for the next commit; ``after(result)`` runs once it
        is durable, ``failed(error)`` if ``write`` raised or the commit failed.
        ``told``: nobody waits for it (see the module's docstring)."""
        self._staged.append(_Staged(write=write, after=after, failed=failed, told=told))

    def flush_idle(self) -> None:
        """What the actor does when its mailbox ran empty: writes nobody
        waits for alone are offered to the next group commit; anything else
        is committed now (``flush``), those along with it."""
        staged = self._staged
        if staged and all(item.told for item in staged):
            offered = self._store.offer([item.write for item in staged])
            if offered is not None:
                self._staged = []
                self.offered.append((staged, offered))
                return
        self.flush()

    def flush(self) -> None:
        """Commit everything staged (and wait for what was offered), then run
        the callbacks in order.

        Writes staged by a callback go into the next flush, which follows at
        once, so a chain of effects never waits for another message."""
        if not self._staged and self.busy:
            self._write([])  # what was offered, durable: commits carry it in order
        self.settle()
        while self._staged:
            staged, self._staged = self._staged, []
            outcomes = self._write(staged)
            self.settle()  # offered before these were staged: their callbacks first
            if outcomes is not None:
                self._settle(staged, outcomes)

    def settle(self) -> None:
        """Run the callbacks of offered writes whose commit ended, in order."""
        while self.offered and self.offered[0][1].done:
            staged, offered = self.offered.pop(0)
            try:
                outcomes = offered.result()
            except Exception as error:  # the whole commit failed (fenced, say)
                self._failed_commit(staged, error)
                continue
            self._settle(staged, outcomes)

    def _write(self, staged: list[_Staged[Any]]) -> list[WriteOutcome] | None:
        """Commit ``staged`` (with whatever is offered); their outcomes, or
        None when the whole commit failed (each failure callback told)."""
        try:
            return self._store.write_each([item.write for item in staged])
        except Exception as error:  # the whole commit failed (fenced, say)
            self._failed_commit(staged, error)
            return None

    def _failed_commit(self, staged: list[_Staged[Any]], error: Exception) -> None:
        if staged:
            log.warning("%s: a group commit of %d writes failed: %s", self._owner, len(staged), error)
        for item in staged:
            self._fail(item, error)

    def _settle(self, staged: list[_Staged[Any]], outcomes: list[WriteOutcome]) -> None:
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
        # Offered writes commit or fail with the next commit whatever happens
        # here; nobody waits for them, so nothing is told.
        self.offered.clear()

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
