"""Chat end to end: events/s and ``send`` latency vs the original JSON files.

enact, events/s: the daemon's own actors (the components' ``enact.components.component_actors``:
epoch, journal, sessions, inbox, and one conversation actor per
conversation) assembled in this process with a Supervisor on real LMDB with
durable commits, the scripted runtime with no rules file (every message gets
its echo) and the local channel. One sender thread per conversation calls
``LocalChannel.send(Send(...))``, which returns once the reply is delivered
and the turn logged. One event: receipt committed → conversation actor →
session opened (an idle read) → memory's recall → runtime (metered and
budgeted as the daemon's, its spending told to the accounting actor) →
inbox: the reply, delivered at once to the local channel, stored with the
turn logged and the receipt completed in one commit; each commit durable
before the next step; the session's record and the spending tally, which
nobody waits for, ride the next commit.

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

Two ways of committing, measured alternately on homes of their own: the
actors' write batches merged into one durable commit per round (the group
committer, the daemon's way) and each actor's batch committing on its own
(the way before it); beside them the floor, a bare durable LMDB commit loop
on the same file system, and each way's durable commits per event.

Latency: a real ``enact daemon run`` process, asked ``local.Send`` through
``enact.cli._client.Client``, and ``python -m enact send hello`` as a whole
process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO, Any

import orjson

from bench._daemons import start_daemon, stop_daemon
from bench._table import Table, median, percentile, rate, ratio
from bench.append_log import _rewrite_atomically
from bench.chat_home import (
    _REPLY,
    _TEXT,
    CONVERSATIONS,
    PREFILL_GROUP,
    _complete,
    _conversation,
    _delivery,
    _Enact,
    _history,
    _receipt,
    _turn,
    bare_commit_s,
)
from enact import __version__
from enact.cli._client import Client
from enact.messages import local
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, Outcome
from enact.messages.local import Send
from enact.messages.outbox import DeliveryState
from enact.runtime import RuntimeRequest
from enact.runtime.scripted import ScriptedRuntime

__all__ = ["TITLE", "_Enact", "run"]

TITLE = "4. Chat end to end: events/s and send latency vs JSON files rewritten per change"
TARGETS = {8: 1_500, 1: 600}
"""Events/s with group commit, per number of conversations, at 0 history and at the full history."""
FLAT = 0.9
"""Events/s at 100,000 history ÷ at 0 at or above this counts as flat."""
WAYS = {"group commit": True, "per-actor commits": False}
"""The way each figure's write batches commit: Storage(group_commit=...)."""
FLOOR_COMMITS = 400

_ROOT = Path(__file__).resolve().parent.parent


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
    daemon = start_daemon(home, log)
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
        code = stop_daemon(daemon)
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


Key = tuple[str, int, int]
"""(way, history, conversations)"""


def _verdict(value: float, target: float) -> str:
    return "PASS" if value >= target else "MISS"


def _measure(enact: _Enact, conversations: int, per_conversation: int, key: Key,
             figures: dict[Key, list[float]], commits: dict[Key, list[float]],
             messages: dict[Key, list[float]]) -> None:
    figures.setdefault(key, []).append(enact.events_per_s(conversations, per_conversation))
    commits.setdefault(key, []).append(enact.commits_per_event)
    messages.setdefault(key, []).append(enact.messages_per_event)


def run(quick: bool) -> Table:
    if quick:
        history, trials, per_conversation, warm = 2_000, 1, {1: 20, 8: 8}, 2
        baseline_counts, sends, runs, floor_commits = {0: 20, history: 5}, 20, 2, 50
    else:
        history, trials, per_conversation, warm = 100_000, 5, {1: 200, 8: 50}, 10
        baseline_counts, sends, runs, floor_commits = {0: 300, history: 20}, 300, 30, FLOOR_COMMITS
    load_before = os.getloadavg()[0]
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    figures: dict[Key, list[float]] = {}
    commits: dict[Key, list[float]] = {}
    messages: dict[Key, list[float]] = {}
    baseline_runs: list[float] = []
    floor_s: list[float] = []
    try:
        full: dict[str, _Enact] = {}
        try:
            for number, (way, group_commit) in enumerate(WAYS.items()):
                full[way] = _Enact(directory / f"full-{number}", history=history, group_commit=group_commit)
            prefill_s = median([enact.prefill_s for enact in full.values()])
            for enact in full.values():
                enact.warm_up(warm)
            for trial in range(trials):  # interleaved: a burst of load elsewhere hits every row alike
                samples, _ = _baseline(directory / f"json-0-{trial}", 0, baseline_counts[0])
                baseline_runs.append(len(samples) / sum(samples))
                floor_s.append(bare_commit_s(directory / f"floor-{trial}", floor_commits))
                # The two ways alternate, and which goes first alternates by trial.
                ways = list(WAYS.items())[:: 1 if trial % 2 == 0 else -1]
                for conversations in CONVERSATIONS:
                    for number, (way, group_commit) in enumerate(ways):
                        empty = _Enact(directory / f"empty-{trial}-{conversations}-{number}", history=0,
                                       group_commit=group_commit)
                        try:
                            empty.warm_up(warm)
                            # Which home goes first alternates too: the one measured second
                            # meets what the first left behind (its writes' writeback).
                            pair = [(empty, 0), (full[way], history)][:: 1 if trial % 2 == 0 else -1]
                            for enact, held in pair:
                                _measure(enact, conversations, per_conversation[conversations],
                                         (way, held, conversations), figures, commits, messages)
                        finally:
                            empty.close()
            full_events = max(enact.events for enact in full.values())
        finally:
            for enact in full.values():
                enact.close()
        baseline_zero, _ = _baseline(directory / "json-0-latency", 0, baseline_counts[0])
        baseline_full, sizes = _baseline(directory / "json-full", history, baseline_counts[history])

        (directory / "latency").mkdir(mode=0o700)
        latency = {
            0: _latency(directory / "latency", directory / "daemon-0.log", sends, runs),
            history: _latency(directory / "full-0", directory / "daemon-full.log", sends, runs),
        }
        version = f"enact, version {__version__}"
        floor = [_run([sys.executable, "-m", "enact", "--version"], dict(os.environ), expect=version)
                 for _ in range(max(3, runs // 3))]
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    group, alone = WAYS  # the names, in the order of the columns
    baseline_rate = {0: median(baseline_runs), history: len(baseline_full) / sum(baseline_full)}
    baseline_samples = {0: baseline_zero, history: baseline_full}
    table = Table(TITLE, ["figure", "history", "conversations", "JSON files", f"enact, {alone}",
                          f"enact, {group}", f"{group} ÷ {alone}", "enact ÷ JSON"])
    rates = {key: median(values) for key, values in figures.items()}
    per_event = {key: median(values) for key, values in commits.items()}
    commit_s = median(floor_s)
    for h in (0, history):
        for conversations in CONVERSATIONS:
            new, old = rates[group, h, conversations], rates[alone, h, conversations]
            table.add("events/s", f"{h:,}", conversations, rate(baseline_rate[h]), rate(old), rate(new),
                      ratio(new / old), ratio(new / baseline_rate[h]))
    for h in (0, history):
        for conversations in CONVERSATIONS:
            new, old = per_event[group, h, conversations], per_event[alone, h, conversations]
            table.add("durable commits/event", f"{h:,}", conversations, "-", f"{old:.2f}", f"{new:.2f}",
                      ratio(new / old), "-")
    handled = {key: median(values) for key, values in messages.items()}
    for h in (0, history):
        for conversations in CONVERSATIONS:
            new, old = handled[group, h, conversations], handled[alone, h, conversations]
            table.add("actor messages/event", f"{h:,}", conversations, "-", f"{old:.2f}", f"{new:.2f}",
                      ratio(new / old), "-")
    for label, index in (("send over the socket", 0), ("`enact send` process", 1)):
        for h in (0, history):
            for name, fraction in (("p50", 0.50), ("p99", 0.99)):
                mine, theirs = percentile(latency[h][index], fraction), percentile(baseline_samples[h], fraction)
                table.add(f"{label} {name} ms", f"{h:,}", 1, _ms(theirs), "-", _ms(mine), "-", ratio(mine / theirs))

    verdicts = []
    for conversations in sorted(CONVERSATIONS, reverse=True):
        target = TARGETS[conversations]
        for h in (0, history):
            figure = rates[group, h, conversations]
            verdicts.append(f"{conversations} conversation(s), {h:,} history: {rate(figure)} "
                            f"(≥ {target:,}) {_verdict(figure, target)}")
    table.note(f"targets, events/s with {group}: {'; '.join(verdicts)}")
    for way in (group, alone):
        flat = []
        for conversations in CONVERSATIONS:
            change = rates[way, history, conversations] / rates[way, 0, conversations]
            flat.append(f"{conversations} conversation(s) {ratio(change)} {_verdict(change, FLAT)}")
        table.note(f"flat with {way}, events/s at {history:,} ÷ at 0 (≥ {FLAT}x): {'; '.join(flat)}")
    table.note(f"JSON files flat: {ratio(baseline_rate[history] / baseline_rate[0])}")
    ceilings = "; ".join(
        f"{conversations} conversation(s) {rate(1 / (commit_s * per_event[group, 0, conversations]))}"
        for conversations in CONVERSATIONS)
    table.note(f"the floor: a bare durable LMDB commit loop ({floor_commits} commits of one record, median of "
               f"{trials}) took {_ms(commit_s)} ms a commit ({rate(1 / commit_s)}/s) in this run; at {group}'s "
               f"commits per event (0 history) that alone allows {ceilings} events/s")
    table.note("actor messages/event: messages the actors handled per event (an idle read, answered in the "
               "asker's thread, is not one)")
    table.note(f"{group}: the write batches every actor has ready share one durable commit (Storage.committer, "
               f"the daemon's way); {alone}: each actor's batch commits on its own (Storage(group_commit=False), "
               f"the way before); each on homes of its own, measured alternately, which first alternating by trial; "
               f"so do the empty home and the full one of each way")
    table.note(f"enact events/s: in this process, the daemon's actors under a Supervisor, one sender thread per "
               f"conversation calling LocalChannel.send (returns once the reply is delivered and the turn logged); "
               f"durable LMDB commits; scripted runtime, no rules file (echo); median of {trials} interleaved "
               f"trial(s) of {per_conversation[1]:,} events (1 conversation) and {per_conversation[8]:,} per "
               f"conversation (8), after {warm} per conversation of warm-up")
    table.note(f"0 history: a fresh home per trial and way; {history:,} history: one home per way, pre-filled "
               f"before the actors start (not through the chat path) with {history:,} completed receipts, "
               f"delivered deliveries and turn-log records written through the inbox's and the outbox's own "
               f"stores in commits of {PREFILL_GROUP:,} events, in the records the inbox and the outbox write, "
               f"each commit settling its old records into the older trees as the inbox does "
               f"({prefill_s:.1f} s); it held {full_events:,} events when its trials ended")
    table.note(f"JSON files: per event, receipt (processing), delivery (pending, with the reply), delivery "
               f"(delivered), receipt (completed): each a rewrite of the whole file (temp file, fsync, rename, "
               f"directory fsync); then the turn appended to a JSONL file and fsynced; the same runtime call; no "
               f"session file; one thread; documents kept in memory and encoded with orjson (favours it); "
               f"{baseline_counts[0]} events timed at 0 (median of {trials}), {baseline_counts[history]} at "
               f"{history:,} (receipt file {sizes[0]:,.0f} MB, journal {sizes[1]:,.0f} MB)")
    table.note(f"send over the socket: a real `enact daemon run` ({group}), local.Send through "
               f"enact.cli._client.Client, {sends} sequential sends on one connection after warm-up; `enact send` "
               f"process: `python -m enact send {_TEXT}` with ENACT_HOME, {runs} runs (p99 of {runs} is about the "
               f"maximum); {history:,} rows on the {group} home of the events/s rows; a new interpreter costs "
               f"{_ms(median(floor))} ms alone (p50 of `python -m enact --version`)")
    table.note("JSON files latency: that way's own per-event time, in one process (no socket, no process start)")
    table.note(f"1-minute load average {load_before:.2f} before this benchmark, {os.getloadavg()[0]:.2f} after (it "
               f"counts this process and the benchmarks before it too; other work on the machine moves every figure)")
    return table
