"""The Memory actor: long-term facts, their admission, merging and forgetting.

A thin front over plain modules: what a write decides
(``enact.memory.remembering``: admission, holding, merging, the owner's
verbs), the facts in LMDB and in memory (``enact.memory.book``), the search
index (``enact.memory.index``), the context and the identities
(``enact.memory.briefing``). Writes are group-committed and acknowledged
only once durable. The index is derived: every write stages the fact in it at
once (search sees it from memory), and its commits are grouped on a timer;
at start, an index that does not reflect the facts' change counter (missing,
stale, corrupt, or a kill between the two commits) is rebuilt from LMDB.
No fact is held in memory: each is read from LMDB when it is needed
(``enact.memory.book``), so a start loads nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import lmdb

from enact.actors._base import STARTED, ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.fence import FencedError
from enact.frozen_dataclass import dataclass
from enact.memory.book import DATABASES, IDENTITY, NO_MATCH, FactBook, FactRecords
from enact.memory.briefing import Briefing, IdentityRecords, checked_identity
from enact.memory.facts import Fact
from enact.memory.forgetting import ForgetIntent, Forgettings, intent_of, patient
from enact.memory.identity import IdentityError, PrivateIdentity
from enact.memory.index import FactIndex
from enact.memory.metrics import MemoryMetrics
from enact.memory.remembering import Write, confirmed, held, needs_human, remembered
from enact.memory.settings import MemorySettings
from enact.memory.upkeep import IndexUpkeep
from enact.messages._framing import first_page
from enact.messages.common import NotFound, RefusalCode, Refused
from enact.messages.memory import (
    Change,
    ClearIdentity,
    Confirm,
    Context,
    Discarded,
    FactList,
    FactShown,
    Forget,
    GetIdentity,
    Identity,
    IdentityCleared,
    IdentityInstalled,
    InstallIdentity,
    List,
    Merged,
    Reject,
    Remember,
    Show,
)

log = logging.getLogger(__name__)

__all__ = ["DATABASES", "INDEX_DIR", "MemoryActor"]

INDEX_DIR = "memory-index"
"""Under ``$ENACT_HOME``: derived data, rebuilt from LMDB when it does not match."""
INDEX_COMMIT_DELAY_S = 1.0
"""How long index work is gathered before one tantivy commit (about 8 ms)."""
INDEX_RETRY_S = 5.0
"""How often a stale index (its writes failed: a full disk) is tried again."""


@dataclass(frozen=True, slots=True)
class _CommitIndex:
    """Told to itself: commit the index work gathered since the last commit."""


@dataclass(frozen=True, slots=True)
class _Load:
    """Told to itself at start: open the index once the daemon is up."""


class MemoryActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._records = FactRecords(self._store)
        settings = context.config.typed(MemorySettings)
        self._max_chars = settings.max_fact_chars
        self._hold_model_facts = settings.confirm_model_facts
        self._book = FactBook(self._store, self._records)
        self._change = 0  # the latest change staged
        self._durable = 0  # the latest change committed to LMDB
        self._index: FactIndex | None = None
        self._commit_due = False
        self._upkeep: IndexUpkeep
        self._identity = IdentityRecords(self._store, IDENTITY)
        self._briefing = Briefing(settings.context, None)
        ask = patient(context.ask, stopping=lambda: context.supervisor.stopping)
        self._forgettings = Forgettings(self._store, self._batch, ask, self.off_thread)

    # -- life cycle ---------------------------------------------------------

    def on_start(self) -> None:
        self._briefing.set_private(self._store.read(self._identity.get))

    def on_receive(self, message: Any) -> Any:
        reply = super().on_receive(message)
        if message is STARTED and self._index is None:
            # The index is opened (and the lookups checked) by a message told
            # once the supervisor knows this actor started, so the daemon does
            # not wait for them to answer; whatever asks meanwhile waits in the
            # mailbox (``handle`` opens first, whichever message comes first).
            self.actor_ref.tell(_Load())
        return reply

    def _load(self) -> None:
        """The lookups checked against the facts (made again when they do not
        reflect them: a home from before them), the index likewise (rebuilt),
        the forgettings a crash cut short resumed. No fact is read unless one
        of them is remade. A record that cannot be read then fails the actor,
        naming it; the supervisor's restarts then stop the daemon saying so."""
        started = time.perf_counter()
        if not self._store.read(self._records.lookups_current):
            count = self._store.write(self._records.remake_lookups)
            log.info("memory: lookups made from %d facts in %.2f s", count, time.perf_counter() - started)
        change = self._store.read(self._records.change)
        self._change = self._durable = change
        self._upkeep = IndexUpkeep.opened(self.context.home / INDEX_DIR, self._book.every, change)
        self._index = self._upkeep.index  # from here on the actor is loaded
        if self._upkeep.stale:
            self._index_commit_due()  # tried again, until it can be written
        self._count()
        self._forgettings.resume()
        log.info("memory: %d facts ready in %.2f s", len(self._book), time.perf_counter() - started)

    def on_stop(self) -> None:
        super().on_stop()  # flushes the batch
        self.cancel_timers()
        if self._index is not None:
            if not self._upkeep.stale:  # a stale one is rebuilt at the next start
                self._commit_index()
            self._index.close()

    @property
    def index(self) -> FactIndex:
        if self._index is None:
            raise RuntimeError("the memory index is used before the actor started")
        return self._index

    @property
    def book(self) -> FactBook:
        """Every fact, for the context and recall (``enact.memory.context``)."""
        return self._book

    # -- messages -----------------------------------------------------------

    def handle(self, message: Any) -> Any:
        if self._index is None:
            self._load()
        match message:
            case Remember():
                return self._remember(message)
            case Forget():
                return self._forget(message)
            case Confirm():
                return self._confirm(message)
            case Reject():
                return self._reject(message)
            case List():
                self._batch.flush()  # what is listed is read from LMDB
                facts, total = self._book.listing(tag=message.tag, origin=message.origin_is,
                                                  pending=message.pending, limit=max(0, message.max_facts))
                # ``total`` tells the CLI how many more there are ("… and N more").
                return FactList(facts=tuple(first_page(facts)), total=total)
            case Show():
                return self._show(message.id)
            case Context():
                # The startup selection, kept per change, is read from LMDB:
                # what is staged is committed first.
                self._batch.flush()
                with self.context.metrics.of(MemoryMetrics).recall_seconds.time():
                    return self._briefing.reply(self._book, message, change=self._change, search=self.index.search)
            case GetIdentity():
                return Identity(body=self._briefing.body, private=self._briefing.private)
            case InstallIdentity():
                return self._install_identity(message)
            case ClearIdentity():
                return self._clear_identity(message)
            case _Load():
                return None
            case _CommitIndex():
                self._commit_due = False
                self._commit_index()
                return None
        return super().handle(message)

    # -- remembering ----------------------------------------------------------

    def _remember(self, message: Remember) -> Deferred | Merged | Refused:
        decided = remembered(message, self._book, max_chars=self._max_chars,
                             hold_model_facts=self._hold_model_facts, now=self.context.clock.time())
        return self._put(decided) if isinstance(decided, Write) else decided

    def _put(self, write: Write) -> Deferred:
        """Write the fact through: in memory and in the index at once (so the
        next message sees it), in LMDB at the group commit, answered after."""
        fact, entry, reply = write.fact, write.entry, write.reply
        staged = self._book.staged(fact)
        self.index.stage(fact)
        self._change += 1
        change = self._change
        deferred = Deferred()

        def failed(error: Exception) -> None:
            self._restore(fact.id)
            deferred.fail(error)

        def after(_: None) -> None:
            self._book.settle(staged)
            self._committed(change, deferred, reply)

        self._batch.stage(lambda txn: self._records.put(txn, fact, entry, change=change), after, failed=failed)
        return deferred

    def _drop(self, fact: Fact, reply: Discarded | None, *, intent: ForgetIntent | None = None) -> Deferred:
        """Delete ``fact``; forgotten (``intent``), the intent to reach its
        copies is committed with the deletion, and the reply follows them."""
        staged = self._book.staged(fact, removed=True)
        self.index.unstage(fact.id)
        self._change += 1
        change = self._change
        deferred = Deferred()

        def write(txn: lmdb.Transaction) -> None:
            self._records.delete(txn, fact.id, change=change)
            if intent is not None:
                self._forgettings.put(txn, intent)

        def after(_: None) -> None:
            self._book.settle(staged)
            if intent is None:
                self._committed(change, deferred, reply)
                return
            self._committed(change)
            self._forgettings.start(intent, deferred)

        def failed(error: Exception) -> None:
            self._restore(fact.id)
            deferred.fail(error)

        self._batch.stage(write, after, failed=failed)
        return deferred

    def _committed(self, change: int, deferred: Deferred | None = None, reply: object = None) -> None:
        """``change`` is durable: count it, answer ``deferred`` when given, and
        have the index commit it soon."""
        self._durable = max(self._durable, change)
        self._count()
        if deferred is not None:
            deferred.resolve(reply)
        self._index_commit_due()

    def _index_commit_due(self) -> None:
        if not self._commit_due:
            self._commit_due = True
            self.tell_later(INDEX_COMMIT_DELAY_S, _CommitIndex())

    def _restore(self, fact_id: str) -> None:
        """A write that failed, before its commit or in a callback after it
        (so it may be durable or not): memory and the index go back to what
        LMDB holds, read again. The change moves on, so the startup context
        is selected again and the index commits what LMDB is at."""
        self._book.forget_staged(fact_id)
        fact, durable = self._store.read(lambda txn: (self._records.get(txn, fact_id), self._records.change(txn)))
        if fact is None:
            self.index.unstage(fact_id)
        else:
            self.index.stage(fact)
        self._change += 1
        self._durable = max(self._durable, durable)
        self._count()
        self._index_commit_due()

    def _commit_index(self) -> None:
        """One tantivy commit for everything gathered, marked with the change
        LMDB holds (the batch is flushed first, so every staged fact is durable)."""
        try:
            self._batch.flush()
        except FencedError:
            return
        if not self._upkeep.commit(self._book.every, self._durable) and not self._commit_due:
            self._commit_due = True  # tried again until it can be written (a full disk)
            self.tell_later(INDEX_RETRY_S, _CommitIndex())

    def _count(self) -> None:
        gauge = self.context.metrics.of(MemoryMetrics).facts
        for state, count in self._book.counts().items():
            gauge.labels(state=state.value).set(count)

    # -- forgetting, confirming -------------------------------------------------

    def _forget(self, message: Forget) -> Deferred | NotFound | Refused:
        refused = needs_human(message.origin, "forget")
        if refused is not None:
            return refused
        self._batch.flush()  # a fact is selected from LMDB
        found = self._book.select(message.selector)
        # A forgetting a crash or a failure cut short is found by what named its fact.
        again = self._forgettings.again(message.selector, redact=message.redact) if found == NO_MATCH else None
        if again is not None:
            return again
        if found == NO_MATCH:
            return NotFound(kind="fact matching", id=message.selector.strip())
        if isinstance(found, str):
            return Refused(reason=found, code=RefusalCode.INVALID)
        return self._drop(found, None, intent=intent_of(found, redact=message.redact, now=self.context.clock.time()))

    def _confirm(self, message: Confirm) -> Deferred | NotFound | Refused:
        fact = held(self._book, message.id, message.origin, "confirm")
        if not isinstance(fact, Fact):
            return fact
        return self._put(confirmed(fact, message.origin, self.context.clock.time()))

    def _reject(self, message: Reject) -> Deferred | NotFound | Refused:
        fact = held(self._book, message.id, message.origin, "reject")
        return fact if not isinstance(fact, Fact) else self._drop(fact, Discarded(id=fact.id))

    # -- reading ------------------------------------------------------------

    def _show(self, fact_id: str) -> FactShown | NotFound:
        self._batch.flush()  # its latest history entry may be staged still
        fact = self._book.get(fact_id.strip())
        if fact is None:
            return NotFound(kind="fact", id=fact_id.strip())

        def read(txn: lmdb.Transaction) -> list[Change]:
            return self._records.history_of(txn, fact.id)

        return FactShown(fact=fact, history=tuple(self._store.read(read)))

    # -- context and identity (enact.memory.briefing) -------------------------------

    def _install_identity(self, message: InstallIdentity) -> Deferred | Refused:
        refused = needs_human(message.origin, "install an identity")
        if refused is not None:
            return refused
        try:
            identity = checked_identity(message.identity)
        except IdentityError as error:
            return Refused(reason=f"refused: {error}", code=RefusalCode.INVALID)
        reply = IdentityInstalled(name=identity.name, replaced=self._briefing.private is not None)
        return self._write_identity(lambda txn: self._identity.put(txn, identity), identity, reply)

    def _clear_identity(self, message: ClearIdentity) -> Deferred | Refused:
        refused = needs_human(message.origin, "clear the identity")
        if refused is not None:
            return refused
        reply = IdentityCleared(cleared=self._briefing.private is not None)
        return self._write_identity(self._identity.delete, None, reply)

    def _write_identity(self, write: Callable[[lmdb.Transaction], object], identity: PrivateIdentity | None,
                        reply: object) -> Deferred:
        """One record, one write: the identity is replaced whole or not at all;
        the startup context uses it from the moment the write is durable."""
        deferred = Deferred()

        def done(_: object) -> None:
            self._briefing.set_private(identity)
            deferred.resolve(reply)

        self._batch.stage(write, done, failed=deferred.fail)
        return deferred
