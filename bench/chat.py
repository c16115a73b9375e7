"""Chat end to end: events/s and ``send`` latency vs the original JSON files.

enact, events/s: the daemon's own actors (``enact.roster.actor_specs``:
epoch, journal, sessions, inbox, and one conversation actor per
conversation) assembled in this process with a Supervisor on real LMDB with
durable commits, the scripted runtime with no rules file (every message gets
its echo) and the local channel. One sender thread per conversation calls
``LocalChannel.send(Send(...))``, which returns once the reply is delivered
and the turn logged. One event: receipt committed → conversation actor →
journal read (its steps) → session lookup → runtime → session recorded →
reply stored → outbox: delivered and journaled → inbox: turn logged and
receipt completed, each commit durable before the next step.

History: sending 100,000 events through the whole path would take minutes,
so the inbox's and the outbox's databases are pre-filled directly before the
actors start, through their own stores in big grouped commits, with the
records they write (completed receipts, delivered deliveries, turn-log
records).

Baseline, the original agent's way: one JSON receipt file and one JSON
delivery journal, each rewritten atomically per change (temp file, fsync,
rename, directory fsync) and never pruned, and turns appended to a JSONL
file with an fsync. Single-threaded. Its cost grows with the files, so at
100,000 events only a few events are timed.

Latency: a real ``enact daemon run`` process, asked ``local.Send`` through
``enact.cli._client.Client``, and ``python -m enact send hello`` as a whole
process.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import lmdb
import orjson

from bench._table import Table, median, percentile, rate, ratio, run_together
from bench.append_log import _rewrite_atomically
from bench.control_socket import _start_daemon, _stop
from enact import __version__, components
from enact.actors.supervisor import Supervisor
from enact.channels import InboxInlet
from enact.channels.local import LocalChannel
from enact.chat import inbox_records, records
from enact.chat import outbox_actor as outbox
from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome
from enact.chat.services import ChatServices
from enact.cli._client import Client
from enact.commands import CommandContext, CommandRegistry, builtin_commands
from enact.daemon import build_runtime, startup_context
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages import local
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, Outcome, Turn
from enact.messages.local import Send
from enact.messages.outbox import DeliveryRecord, DeliveryState
from enact.metrics import Metrics
from enact.roster import actor_specs
from enact.runtime import RuntimeRequest
from enact.runtime.scripted import ScriptedRuntime
from enact.storage import RecordTable, Storage, Store

TITLE = "4. Chat end to end: events/s and send latency vs JSON files rewritten per change"
TARGET = 500
FLAT = 0.85
"""Events/s at 100,000 history ÷ at 0 at or above this counts as flat."""
CONVERSATIONS = (1, 8)
PREFILL_GROUP = 10_000

_TEXT = "hello"
_REPLY = f"(scripted runtime) You said: {_TEXT}"
_ROOT = Path(__file__).resolve().parent.parent


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


class _ChatDatabases:
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


class _Enact:
    """The daemon's chat actors in this process, on a home of their own."""

    def __init__(self, home: Path, *, history: int) -> None:
        home.mkdir(mode=0o700)
        self.home = home
        self.events = self.history = history
        self.prefill_s = 0.0
        self.fatal: list[str] = []
        installed = components.builtin()
        settings = installed.load_config(home, environ={})
        self.storage = Storage(home / STATE_DIR, map_size=settings["storage.map_size_mb"] << 20)
        self.fence = Fence(home, self.storage)
        self.supervisor: Supervisor | None = None
        try:
            self.fence.acquire(takeover=False)  # every write runs the fence guard, as in the daemon
            # The inbox's and the outbox's own stores (the supervisor grants them the same).
            self.databases = _ChatDatabases(self.storage.grant("inbox", inbox_records.DATABASES),
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
            services = ChatServices(
                channels={self.channel.name: self.channel},
                # The scripted runtime; no rules file, so every reply is an echo.
                runtime=build_runtime(installed, settings),
                commands=commands,
                startup_context=startup_context(commands),
                origins={self.channel.name: HUMAN_CLI},
            )
            self.supervisor = Supervisor(
                actor_specs(services), home=home, config=settings, metrics=Metrics(), storage=self.storage,
                fence=self.fence, on_fatal=self.fatal.append,
            )
            commands.bind(CommandContext(fence=self.fence, status=lambda: "bench"))
            self.supervisor.start()
            self.channel.start(
                InboxInlet(self.channel.name, lambda to, message: self._ask(to, message, timeout), origin=HUMAN_CLI)
            )
        except BaseException:
            self.close()
            raise

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
        elapsed = run_together(threads, ready, errors)
        self.events += conversations * per_conversation
        self.check()
        return conversations * per_conversation / elapsed

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
        if self.supervisor is not None:
            self.supervisor.stop(10)
        self.fence.release()
        self.storage.close()


# -- the original agent's way ---------------------------------------------------------


def _document(record: object) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(orjson.dumps(record))
    return document


class _JsonFiles:
    """A JSON receipt file and a JSON delivery journal, each rewritten
    atomically per change, and a JSONL turn log appended with an fsync."""

    def __init__(self, directory: Path, *, history: int) -> None:
        directory.mkdir()
        self.receipts_path = directory / "receipts.json"
        self.journal_path = directory / "journal.json"
        # Plain dicts, as the original agent kept them (orjson writes a
        # dataclass several times slower than a dict).
        self.receipts: dict[str, dict[str, Any]] = {}
        self.journal: dict[str, dict[str, Any]] = {}
        self.runtime = ScriptedRuntime(directory / "scripted.toml")  # no rules file: the echo, as on enact's side
        self.sessions: dict[str, str] = {}
        lines = []
        for event_id, receipt, delivery, turn in _history(history, 1):
            self.receipts[event_id] = _document(receipt)
            self.journal[event_id] = _document(delivery)
            lines.append(orjson.dumps(turn))
        _rewrite_atomically(self.receipts_path, list(self.receipts.values()))
        _rewrite_atomically(self.journal_path, list(self.journal.values()))
        turns_path = directory / "turns.jsonl"
        turns_path.write_bytes(b"".join(line + b"\n" for line in lines))
        self._turns: IO[bytes] = open(turns_path, "ab")  # noqa: SIM115 (closed in close())

    def _save(self, path: Path, documents: dict[str, Any]) -> None:
        _rewrite_atomically(path, list(documents.values()))

    def event(self, conversation: str) -> float:
        """One event's steps; returns its seconds."""
        started = time.perf_counter()
        event = ChatEvent(channel=local.NAME, conversation=conversation, message_id=uuid.uuid4().hex, text=_TEXT,
                          sender=HUMAN_CLI)
        event_id = event.event_id
        if event_id in self.receipts:
            raise RuntimeError("a duplicate: fresh message ids never repeat")
        receipt = _receipt(event, 1, time.time())
        self.receipts[event_id] = _document(receipt)
        self._save(self.receipts_path, self.receipts)  # 1. receipt: processing
        key = event.conversation_key
        result = self.runtime.invoke(RuntimeRequest(
            session_key=key, prompt=f"Owner message ({event.channel}, conversation {event.conversation}):\n{_TEXT}",
            native_session=self.sessions.get(key), owner_message=_TEXT))
        if result.native_session:
            self.sessions[key] = result.native_session
        pending = _delivery(event, result.text, DeliveryState.PENDING, time.time(), 1)
        self.journal[event_id] = _document(pending)
        self._save(self.journal_path, self.journal)  # 2. delivery: pending, with the reply
        # (the local channel with no deliver command delivers by answering the caller)
        self.journal[event_id] = {**self.journal[event_id], "state": "delivered", "updated_at": time.time()}
        self._save(self.journal_path, self.journal)  # 3. delivery: delivered
        self.receipts[event_id] = _document(_complete(receipt, result.text, time.time()))
        self._save(self.receipts_path, self.receipts)  # 4. receipt: completed
        self._turns.write(orjson.dumps(_turn(event_id, event, result.text, time.time())) + b"\n")
        self._turns.flush()
        os.fsync(self._turns.fileno())  # 5. turn appended
        if result.text != _REPLY:
            raise RuntimeError(f"unexpected reply {result.text!r}")
        return time.perf_counter() - started

    def sizes_mb(self) -> tuple[float, float]:
        return self.receipts_path.stat().st_size / 1e6, self.journal_path.stat().st_size / 1e6

    def close(self) -> None:
        self._turns.close()


def _baseline(directory: Path, history: int, count: int) -> tuple[list[float], tuple[float, float]]:
    files = _JsonFiles(directory, history=history)
    try:
        samples = [files.event(_conversation(0)) for _ in range(count)]
        return samples, files.sizes_mb()
    finally:
        files.close()
        shutil.rmtree(directory, ignore_errors=True)


# -- latency through a real daemon ----------------------------------------------------


def _latency(home: Path, log: Path, sends: int, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of each ``local.Send`` over the socket and of each ``enact send`` process."""
    daemon = _start_daemon(home, log)
    try:
        with Client(home, timeout=60) as client:

            def send() -> float:
                started = time.perf_counter()
                outcome = client.request(Send(text=_TEXT, conversation="latency"))
                elapsed = time.perf_counter() - started
                if not (isinstance(outcome, Outcome) and outcome.reply == _REPLY):
                    raise RuntimeError(f"unexpected outcome: {outcome!r}")
                return elapsed

            for _ in range(max(5, sends // 10)):
                send()
            over_socket = [send() for _ in range(sends)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
        env["ENACT_HOME"] = str(home)
        processes = [_run([sys.executable, "-m", "enact", "send", _TEXT], env, expect=_REPLY) for _ in range(runs)]
    finally:
        code = _stop(daemon)
    if code != 0:
        raise RuntimeError(f"the daemon exited with {code} on SIGTERM:\n{log.read_text(errors='replace')}")
    return over_socket, processes


def _run(argv: list[str], env: dict[str, str], *, expect: str) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=_ROOT, capture_output=True, text=True, timeout=60, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0 or result.stdout.strip() != expect:
        raise RuntimeError(f"{argv[2:]} exited {result.returncode}: {result.stdout!r} {result.stderr!r}")
    return elapsed


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


# -- the table ------------------------------------------------------------------------


def run(quick: bool) -> Table:
    if quick:
        history, trials, per_conversation, warm = 2_000, 1, {1: 20, 8: 8}, 2
        baseline_counts, sends, runs = {0: 20, history: 5}, 20, 2
    else:
        history, trials, per_conversation, warm = 100_000, 5, {1: 200, 8: 50}, 10
        baseline_counts, sends, runs = {0: 300, history: 20}, 300, 30
    load_before = os.getloadavg()[0]
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    enact: dict[tuple[int, int], list[float]] = {(h, c): [] for h in (0, history) for c in CONVERSATIONS}
    baseline_runs: list[float] = []
    try:
        full = _Enact(directory / "full", history=history)
        try:
            prefill_s = full.prefill_s
            full.warm_up(warm)
            for trial in range(trials):  # interleaved: a burst of load elsewhere hits every row alike
                samples, _ = _baseline(directory / f"json-0-{trial}", 0, baseline_counts[0])
                baseline_runs.append(len(samples) / sum(samples))
                for conversations in CONVERSATIONS:
                    empty = _Enact(directory / f"empty-{trial}-{conversations}", history=0)
                    try:
                        empty.warm_up(warm)
                        enact[0, conversations].append(empty.events_per_s(conversations,
                                                                          per_conversation[conversations]))
                    finally:
                        empty.close()
                    enact[history, conversations].append(full.events_per_s(conversations,
                                                                           per_conversation[conversations]))
            full_events = full.events
        finally:
            full.close()
        baseline_zero, _ = _baseline(directory / "json-0-latency", 0, baseline_counts[0])
        baseline_full, sizes = _baseline(directory / "json-full", history, baseline_counts[history])

        (directory / "latency").mkdir(mode=0o700)
        latency = {
            0: _latency(directory / "latency", directory / "daemon-0.log", sends, runs),
            history: _latency(directory / "full", directory / "daemon-full.log", sends, runs),
        }
        version = f"enact, version {__version__}"
        floor = [_run([sys.executable, "-m", "enact", "--version"], dict(os.environ), expect=version)
                 for _ in range(max(3, runs // 3))]
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    baseline_rate = {0: median(baseline_runs), history: len(baseline_full) / sum(baseline_full)}
    baseline_samples = {0: baseline_zero, history: baseline_full}
    table = Table(TITLE, ["figure", "history", "conversations", "JSON files", "enact", "enact ÷ JSON"])
    figures = {key: median(values) for key, values in enact.items()}
    for h in (0, history):
        for conversations in CONVERSATIONS:
            table.add("events/s", f"{h:,}", conversations, rate(baseline_rate[h]), rate(figures[h, conversations]),
                      ratio(figures[h, conversations] / baseline_rate[h]))
    for label, index in (("send over the socket", 0), ("`enact send` process", 1)):
        for h in (0, history):
            for name, fraction in (("p50", 0.50), ("p99", 0.99)):
                mine, theirs = percentile(latency[h][index], fraction), percentile(baseline_samples[h], fraction)
                table.add(f"{label} {name} ms", f"{h:,}", 1, _ms(theirs), _ms(mine), ratio(mine / theirs))

    verdicts = []
    for h in (0, history):
        verdicts.append(f"{h:,} history {rate(figures[h, 8])} "
                        f"{'PASS' if figures[h, 8] >= TARGET else 'MISS'}")
    table.note(f"target ≥ {TARGET} events/s with 8 conversations: {'; '.join(verdicts)}")
    flat = []
    for conversations in CONVERSATIONS:
        change = figures[history, conversations] / figures[0, conversations]
        flat.append(f"{conversations} conversation(s) {ratio(change)} {'PASS' if change >= FLAT else 'MISS'}")
    table.note(f"per-event cost vs history, events/s at {history:,} ÷ at 0 (flat: ≥ {FLAT}x): {'; '.join(flat)}; "
               f"JSON files {ratio(baseline_rate[history] / baseline_rate[0])}")
    table.note(f"enact events/s: in this process, the daemon's actors under a Supervisor, one sender thread per "
               f"conversation calling LocalChannel.send (returns once the reply is delivered and the turn logged); "
               f"durable LMDB commits; scripted runtime, no rules file (echo); median of {trials} interleaved "
               f"trial(s) of {per_conversation[1]:,} events (1 conversation) and {per_conversation[8]:,} per "
               f"conversation (8), after {warm} per conversation of warm-up")
    table.note(f"0 history: a fresh home per trial; {history:,} history: one home, pre-filled before the actors "
               f"start (not through the chat path) with {history:,} completed receipts, delivered deliveries and "
               f"turn-log records written through the inbox's and the outbox's own stores in commits of "
               f"{PREFILL_GROUP:,} events, in the records the inbox and the outbox write ({prefill_s:.1f} s); "
               f"it held {full_events:,} events when its trials ended")
    table.note(f"JSON files: per event, receipt (processing), delivery (pending, with the reply), delivery "
               f"(delivered), receipt (completed): each a rewrite of the whole file (temp file, fsync, rename, "
               f"directory fsync); then the turn appended to a JSONL file and fsynced; the same runtime call; no "
               f"session file; one thread; documents kept in memory and encoded with orjson (favours it); "
               f"{baseline_counts[0]} events timed at 0 (median of {trials}), {baseline_counts[history]} at "
               f"{history:,} (receipt file {sizes[0]:,.0f} MB, journal {sizes[1]:,.0f} MB)")
    table.note(f"send over the socket: a real `enact daemon run`, local.Send through enact.cli._client.Client, "
               f"{sends} sequential sends on one connection after warm-up; `enact send` process: "
               f"`python -m enact send {_TEXT}` with ENACT_HOME, {runs} runs (p99 of {runs} is about the "
               f"maximum); {history:,} rows on the home of the events/s rows; a new interpreter costs "
               f"{_ms(median(floor))} ms alone (p50 of `python -m enact --version`)")
    table.note("JSON files latency: that way's own per-event time, in one process (no socket, no process start)")
    table.note(f"1-minute load average {load_before:.2f} before this benchmark, {os.getloadavg()[0]:.2f} after (it "
               f"counts this process and the benchmarks before it too; other work on the machine moves every figure)")
    return table
