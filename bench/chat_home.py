"""The enact side of the chat benchmark (row 4): the daemon's chat actors in
this process on a home of their own, the records they write for pre-filled
history, and the floor under them (a bare durable LMDB commit loop).

``group_commit`` picks how the actors' write batches commit: together, one
durable transaction for what every actor has ready (``Storage.committer``,
the daemon's way), or each actor's batch on its own (the way before it). The
storage counts its write transactions, so each figure can say how many
durable commits an event took.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from bench._table import run_together
from enact import components
from enact._app.reports import tally_spend
from enact.actors.supervisor import Supervisor
from enact.budget.gate import BudgetGate
from enact.budget.settings import BudgetSettings
from enact.channels import InboxInlet
from enact.channels.local import LocalChannel
from enact.chat import inbox_records, records
from enact.chat import outbox_actor as outbox
from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome
from enact.clock import REAL_CLOCK
from enact.commands import CommandContext, CommandRegistry, builtin_commands
from enact.components import DaemonParts
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages import local
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, Outcome, Turn
from enact.messages.local import Send
from enact.messages.outbox import DeliveryRecord, DeliveryState
from enact.metrics import Metrics
from enact.one_cpu import pin_threads, unpin_threads
from enact.runtime import Usage
from enact.runtime.metered import MeteredRuntime
from enact.storage import RecordTable, Storage, Store
from enact.tasks.confined_calls import build_runtime

T = TypeVar("T")

CONVERSATIONS = (1, 8)

PREFILL_GROUP = 10_000

_TEXT = "hello"
_REPLY = f"(scripted runtime) You said: {_TEXT}"


def _conversation(index: int) -> str:
    return f"bench-{index}"


# -- the records the inbox and the outbox write (enact.chat.records,
# enact.messages.outbox), with the times set


def _receipt(event: ChatEvent, generation: int, at: float) -> Receipt:
    return records.new_receipt(event, origin=HUMAN_CLI, generation=generation, now=at)


def _delivery(event: ChatEvent, reply: str, state: DeliveryState, at: float, generation: int) -> DeliveryRecord:
    return DeliveryRecord(channel=event.channel, conversation=event.conversation, message_id=event.message_id,
                          text=reply, state=state, attempts=1, error="", updated_at=at, generation=generation)


def _complete(receipt: Receipt, reply: str, at: float) -> Receipt:
    return dataclasses.replace(receipt, status=ReceiptStatus.COMPLETED, reply=reply, outcome=TurnOutcome.REPLIED,
                               finished_at=at)


def _turn(event_id: str, event: ChatEvent, reply: str, at: float) -> Turn:
    return records.turn_of(_complete(_receipt(event, 1, at), reply, at), now=at)


_Row = tuple[str, Receipt, DeliveryRecord, Turn]


def _history(count: int, generation: int) -> Iterator[_Row]:
    """``count`` finished events: (event id, completed receipt, delivered delivery, turn)."""
    start = time.time() - count
    for n in range(count):
        event = ChatEvent(channel=local.NAME, conversation=_conversation(n % 8), message_id=f"history-{n}",
                          text=_TEXT, sender=HUMAN_CLI)
        at = start + n
        receipt = _complete(_receipt(event, generation, at), _REPLY, at)
        delivery = _delivery(event, _REPLY, DeliveryState.DELIVERED, at, generation)
        yield event.event_id, receipt, delivery, _turn(event.event_id, event, _REPLY, at)


# -- enact ------------------------------------------------------------------------


class ChatDatabases:
    """The inbox's databases and the outbox's, each through its own store."""

    def __init__(self, store: Store, outbox_store: Store) -> None:
        self.store = store
        self.outbox_store = outbox_store
        self.records = inbox_records.InboxRecords(store)
        self.receipts = self.records.receipts
        self.open = self.records.open
        self.deliveries = RecordTable(outbox_store.table(outbox.DELIVERIES), DeliveryRecord)
        self.turns = self.records.turns

    def prefill(self, count: int, generation: int) -> None:
        rows = _history(count, generation)
        while True:
            group = [row for _, row in zip(range(PREFILL_GROUP), rows, strict=False)]
            if not group:
                return

            def write(txn: lmdb.Transaction, group: list[_Row] = group) -> list[bytes]:
                keys = []
                for event_id, receipt, _, turn in group:
                    key = self.records.create(txn, event_id, receipt)
                    self.open.delete(txn, key)  # finished
                    self.turns.append(txn, turn)
                    keys.append(key)
                while self.records.settle(txn):
                    pass  # the old records in the older trees, as the inbox's settles leave them
                return keys

            def write_deliveries(txn: lmdb.Transaction, keys: list[bytes],
                                 group: list[_Row] = group) -> None:
                for key, (_, _, delivery, _) in zip(keys, group, strict=True):
                    self.deliveries.put(txn, key, delivery)

            keys = self.store.write(write)
            self.outbox_store.write(lambda txn, keys=keys: write_deliveries(txn, keys))

    def counts(self) -> tuple[int, int, int, int]:
        """Receipts, still-open receipts, deliveries and logged turns."""
        receipts, still_open, turns = self.store.read(
            lambda txn: (self.receipts.table.count(txn), self.open.count(txn), self.turns.log.last_cursor(txn)))
        deliveries = self.outbox_store.read(self.deliveries.table.count)
        return receipts, still_open, deliveries, turns


class _CountingStorage(Storage):
    """Storage that counts its durable write transactions."""

    commits = 0

    def _write(self, fn: Callable[[lmdb.Transaction], T], *, guarded: bool) -> T:
        result = super()._write(fn, guarded=guarded)
        self.commits += 1
        return result


class _Enact:
    """The daemon's chat actors in this process, on a home of their own."""

    def __init__(self, home: Path, *, history: int, group_commit: bool = True) -> None:
        home.mkdir(mode=0o700)
        self.home = home
        self.events = self.history = history
        self.prefill_s = 0.0
        self.fatal: list[str] = []
        installed = components.load()
        settings = installed.load_config(home, environ={})
        # As `daemon run` does before its first thread: the actors and the
        # senders (the control connections' stand-ins) inherit it.
        self.one_cpu = settings["daemon.one_cpu"] and pin_threads() is not None
        self.storage = _CountingStorage(home / STATE_DIR, map_size=settings["storage.map_size_mb"] << 20,
                                        group_commit=group_commit)
        self.commits_per_event = 0.0
        """Durable commits per event in the last ``events_per_s``."""
        self.messages_per_event = 0.0
        """Messages the actors handled per event in the last ``events_per_s`` (idle reads, answered
        in the asker's thread, not counted)."""
        self.fence = Fence(home, self.storage)
        self.supervisor: Supervisor | None = None
        try:
            self.fence.acquire(takeover=False)  # every write runs the fence guard, as in the daemon
            # The inbox's and the outbox's own stores (the supervisor grants them the same).
            self.databases = ChatDatabases(self.storage.grant("inbox", inbox_records.DATABASES),
                                            self.storage.grant("outbox", outbox.DATABASES))
            if history:
                started = time.perf_counter()
                self.databases.prefill(history, self.fence.generation)
                self.prefill_s = time.perf_counter() - started
            commands = CommandRegistry()
            for command in builtin_commands(commands):
                commands.register(command)
            timeout = settings["control.request_timeout_s"]
            self.channel = LocalChannel(wait_timeout_s=timeout)
            # The scripted runtime (no rules file, so every reply is an echo),
            # metered and budgeted as the daemon's (enact.daemon): each call
            # counted, the budget gate read, the accounting actor told.
            runtime = build_runtime(installed, settings)
            metrics = Metrics()
            metrics.initialise(adapters=(runtime.name,))
            budget = BudgetGate(settings.typed(BudgetSettings), REAL_CLOCK)
            parts = DaemonParts(
                settings=settings,
                runtime=MeteredRuntime(runtime, metrics, on_spent=self._spent, budget=budget),
                channels={self.channel.name: self.channel},
                origins={self.channel.name: HUMAN_CLI},
                commands=commands,
                budget=budget,
            )
            installed.create_metrics(metrics.registry)
            self.supervisor = Supervisor(
                components.component_actors(installed, parts), home=home, config=settings, metrics=metrics,
                storage=self.storage, fence=self.fence, on_fatal=self.fatal.append,
            )
            commands.bind(CommandContext(fence=self.fence, status=lambda: "bench"))
            self.supervisor.start()
            self.channel.start(
                InboxInlet(self.channel.name, lambda to, message: self._ask(to, message, timeout), origin=HUMAN_CLI)
            )
        except BaseException:
            self.close()
            raise

    def _spent(self, purpose: str, usage: Usage) -> None:
        assert self.supervisor is not None
        tally_spend(self.supervisor, purpose, usage)

    def _ask(self, actor: str, message: Any, timeout: float) -> Any:
        assert self.supervisor is not None
        return self.supervisor.ask(actor, message, timeout=timeout)

    def send(self, conversation: str) -> None:
        outcome = self.channel.send(Send(text=_TEXT, conversation=conversation, origin=HUMAN_CLI))
        if not (isinstance(outcome, Outcome) and outcome.status == "replied" and not outcome.duplicate
                and outcome.reply == _REPLY):
            raise RuntimeError(f"unexpected outcome: {outcome!r}")

    def events_per_s(self, conversations: int, per_conversation: int) -> float:
        """All events over the wall time, one sender thread per conversation."""
        errors: list[BaseException] = []
        ready = threading.Barrier(conversations + 1)

        def sender(index: int) -> None:
            try:
                ready.wait()
                for _ in range(per_conversation):
                    self.send(_conversation(index))
            except BaseException as error:
                errors.append(error)
                ready.abort()

        threads = [threading.Thread(target=sender, args=(index,)) for index in range(conversations)]
        commits, messages = self.storage.commits, self._handled()
        elapsed = run_together(threads, ready, errors)
        self.commits_per_event = (self.storage.commits - commits) / (conversations * per_conversation)
        self.messages_per_event = (self._handled() - messages) / (conversations * per_conversation)
        self.events += conversations * per_conversation
        self.check()
        return conversations * per_conversation / elapsed

    def _handled(self) -> int:
        assert self.supervisor is not None
        return sum(status.handled for status in self.supervisor.statuses())

    def warm_up(self, per_conversation: int) -> None:
        """Start every conversation actor and its runtime session."""
        self.events_per_s(max(CONVERSATIONS), per_conversation)

    def check(self) -> None:
        """Every event sent is durably finished: receipt and turn. A reply
        delivered at its first attempt is recorded by its receipt, so the
        delivery journal holds only the pre-filled history (every one
        journaled, as homes written before the outbox have them)."""
        counts = self.databases.counts()
        if counts != (self.events, 0, self.history, self.events):
            raise RuntimeError(f"expected {self.events:,} receipts (none open) and turns and {self.history:,} "
                               f"journaled deliveries; found {counts}")
        if self.fatal:
            raise RuntimeError(f"the supervisor gave up: {self.fatal}")

    def close(self) -> None:
        try:
            if self.supervisor is not None:
                self.supervisor.stop(10)
            self.fence.release()
            self.storage.close()
        finally:
            if self.one_cpu:
                unpin_threads()  # the rows after this one start programs from this thread



def bare_commit_s(directory: Path, count: int) -> float:
    """The floor: seconds per durable LMDB commit of one small record, in a
    bare loop on the benchmark's own file system (no actors, no fence)."""
    directory.mkdir()
    env = lmdb.open(str(directory), map_size=64 << 20)
    try:
        started = time.perf_counter()
        for n in range(count):
            with env.begin(write=True) as txn:
                txn.put(b"%08d" % n, b"x" * 200)
        return (time.perf_counter() - started) / count
    finally:
        env.close()
