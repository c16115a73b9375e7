"""Memory at 1k, 10k and 100k facts: remember (new and merging), forget,
startup context and recall, median per operation, beside the original
agent's way measured in the same run.

enact: what the Memory actor does per message, on its own modules in this
process — admission, the in-memory fact book, one durable LMDB commit per
operation (the actor groups commits, so this is its slowest case), the fact
staged in the tantivy index, whose commits are grouped (one every
``INDEX_GROUP`` operations here, its cost shared among them); startup is a
fresh selection over every fact, recall one BM25 search plus the selection.

Baselines: the original agent's way (its whole store one JSON document,
each change under a lock: read and parse it, change the list, write it
whole, fsync, rename; a duplicate found by comparing with every fact;
startup and recall by reading and sorting every fact, recall scored by words
shared with the message), and a lean JSON list cheaper than the original's
(kept in memory, orjson, only the write on disk). Their cost grows with the
list, so at 100k only a few of their operations are timed.

Also: the index rebuilt from 100k facts, and a real ``enact daemon run`` on
homes holding 0, 10k and 100k facts and as many logged turns (pre-filled
through the actors' own records): its RSS once memory answers and after a
round of work, and how long after the daemon its memory answers, each beside
its target (issue 24) with PASS or MISS.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lmdb
import orjson

from bench import memory_daemon
from bench._table import Table, median, ratio
from enact.actors._batching import WriteBatch
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.memory.admission import Candidate, Refusal, admit, merge_key, merged, new_fact
from enact.memory.book import DATABASES, FactBook, FactRecords
from enact.memory.context import ContextSettings, select_recall, select_startup
from enact.memory.facts import FactState
from enact.memory.forgetting import FORGETTING, ForgetIntent, intent_of
from enact.memory.index import FactIndex
from enact.memory.memory_actor import INDEX_COMMIT_DELAY_S
from enact.messages.memory import Change
from enact.storage import RecordTable, Storage

CONTEXT_TARGET_S = 0.002
TITLE = "6. Memory: remember, forget, startup context and recall vs one JSON list"
INDEX_GROUP = 100
CLIENTS = 32
"""Clients asking at once, for the group-committed remember row."""
_WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze") for b in
          ("ban", "cor", "dil", "fen", "gar", "hul", "jor", "kem", "lin", "mar", "nor", "pol", "rin", "sal",
           "tor", "vel", "wix", "yan", "zor", "bel")]
_TOKEN = re.compile(r"\w+")
SETTINGS = ContextSettings()


def _text(rng: random.Random, n: int) -> str:
    return f"fact {n}: the owner " + " ".join(rng.choice(_WORDS) for _ in range(8))


def _candidate(text: str) -> Candidate:
    return Candidate(text=text, origin="human-cli", tags=("bench",))


class _Enact:
    """The Memory actor's per-message work, on real LMDB and tantivy."""

    def __init__(self, home: Path, texts: list[str]) -> None:
        home.mkdir(mode=0o700)
        self.storage = Storage(home / STATE_DIR)
        self.fence = Fence(home, self.storage)
        self.fence.acquire(takeover=False)
        self.store = self.storage.grant("memory", DATABASES)
        self.records = FactRecords(self.store)
        self.intents = RecordTable(self.store.table(FORGETTING), ForgetIntent)
        now = time.time()
        facts = []
        for n, text in enumerate(texts):
            admitted = admit(_candidate(text), max_chars=500)
            assert not isinstance(admitted, Refusal)
            facts.append(new_fact(admitted, fact_id=f"f-{n:08x}", state=FactState.ACTIVE, now=now + n))
        self.book = FactBook(self.store, self.records)
        self.change = 0
        entry = Change(at=now, change="created", origin="human-cli")

        def fill(txn: Any) -> None:
            for fact in facts:
                self.change += 1
                self.records.put(txn, fact, entry, change=self.change)

        self.store.write(fill)
        self.index = FactIndex(home / "memory-index")
        started = time.perf_counter()
        self.index.rebuild(self.book.every, self.change)
        self.rebuild_s = time.perf_counter() - started
        self.since_commit = 0
        self.batch = WriteBatch(self.store, owner="memory")
        self.index_committed_at = time.monotonic()

    def _after_write(self) -> None:
        self.since_commit += 1
        if self.since_commit >= INDEX_GROUP:
            self.index.commit(self.change)
            self.since_commit = 0

    def _remembered(self, text: str) -> Callable[[Any], None]:
        """The actor's work for one Remember up to its commit; the write to
        commit (which settles what the book staged, as the actor's callback does)."""
        admitted = admit(_candidate(text), max_chars=500)
        assert not isinstance(admitted, Refusal)
        now = time.time()
        existing = self.book.by_key(admitted.key)
        if existing is not None:
            fact = merged(existing, admitted, state=FactState.ACTIVE, now=now)
            entry = Change(at=now, change="merged", origin="human-cli")
        else:
            fact = new_fact(admitted, fact_id=self.book.new_id(), state=FactState.ACTIVE, now=now)
            entry = Change(at=now, change="created", origin="human-cli")
        staged = self.book.staged(fact)
        self.index.stage(fact)
        self.change += 1
        change = self.change

        def write(txn: Any) -> None:
            self.records.put(txn, fact, entry, change=change)
            self.book.settle(staged)

        return write

    def remember(self, text: str) -> None:
        self.store.write(self._remembered(text))
        self._after_write()

    def remember_together(self, texts: list[str]) -> bool:
        """As the actor serves clients who ask at once: each message's work,
        one group commit for them all (its WriteBatch), and the index
        committed on the actor's timer (``INDEX_COMMIT_DELAY_S``)."""
        for text in texts:
            self.batch.stage(self._remembered(text))
        self.batch.flush()
        if time.monotonic() - self.index_committed_at < INDEX_COMMIT_DELAY_S:
            return False
        self.index.commit(self.change)
        self.index_committed_at = time.monotonic()
        return True

    def forget_text(self, text: str) -> None:
        self.forget(text)

    def forget(self, fact_id: str) -> None:
        found = self.book.select(fact_id)
        assert not isinstance(found, str)
        staged = self.book.staged(found, removed=True)
        self.index.unstage(found.id)
        self.change += 1
        change = self.change
        intent = intent_of(found, redact=False, now=time.time())

        def delete(txn: lmdb.Transaction) -> None:
            self.records.delete(txn, found.id, change=change)
            self.intents.put(txn, found.id.encode(), intent)

        # The intent to reach the fact's copies is committed with the
        # deletion, and deleted once they are (the other actors' work is not
        # timed here).
        self.store.write(delete)
        self.book.settle(staged)
        self.store.write(lambda txn: self.intents.delete(txn, found.id.encode()))
        self._after_write()

    def startup(self) -> frozenset[str]:
        return select_startup(self.book, body_identity="enact", private_identity="", settings=SETTINGS,
                              explain=False, ranking=self.book.ranking).fact_ids

    def recall(self, query: str, startup_ids: frozenset[str]) -> None:
        select_recall(query, search=self.index.search, lookup=self.book.get, startup_ids=startup_ids,
                      settings=SETTINGS)

    def close(self) -> None:
        if self.index.pending:
            self.index.commit(self.change)  # a daemon started on the home finds its index current
        self.index.close()
        self.fence.release()
        self.storage.close()


class _LeanJson:
    """A lean JSON list: the list kept in memory, only the writes on disk
    (orjson, temp file, fsync, rename), rewritten whole per change."""

    def __init__(self, directory: Path, texts: list[str]) -> None:
        directory.mkdir()
        self.path = directory / "memories.json"
        now = time.time()
        self.facts: list[dict[str, Any]] = [
            {"id": f"m{n}", "text": text, "confidence": "high", "tags": ["bench"], "updated_at": now + n}
            for n, text in enumerate(texts)
        ]
        self._save()

    def _save(self) -> None:
        _write_durably(self.path, orjson.dumps(self.facts))

    def remember(self, text: str) -> None:
        key = merge_key(text)
        for fact in self.facts:
            if merge_key(fact["text"]) == key:
                fact["updated_at"] = time.time()
                break
        else:
            self.facts.append({"id": f"m{len(self.facts)}", "text": text, "confidence": "high",
                               "tags": ["bench"], "updated_at": time.time()})
        self._save()

    def forget(self, fact_id: str) -> None:
        self.facts = [fact for fact in self.facts if fact["id"] != fact_id]
        self._save()

    def forget_text(self, text: str) -> None:
        key = merge_key(text)
        self.facts = [fact for fact in self.facts if merge_key(fact["text"]) != key]
        self._save()

    def startup(self) -> None:
        _startup_by_sorting(self.facts)

    def recall(self, query: str) -> None:
        _recall_by_sorting(self.facts, query)


class _Original:
    """The original agent's way, as its store does it: one JSON document
    (the standard library's json, indented), and every change under a lock
    file: read and parse the whole document, change the list, write it whole
    (temp file, fsync, rename). Ids ``mem_YYYYMMDD_NNN``, the first free
    index of the day; records of the original's shape; a duplicate found by
    normalising and comparing every fact's text. Startup and recall read the
    document and sort every fact."""

    def __init__(self, directory: Path, texts: list[str]) -> None:
        directory.mkdir()
        self.path = directory / "long_term.json"
        self.lock = directory / "long_term.json.lock"
        stamp = "2026-12-01T09:00:00+00:00"
        memories = [self._record(f"mem_20261201_{n + 1:03d}", text, stamp) for n, text in enumerate(texts)]
        self._write({"schema": 1, "memories": memories})

    @staticmethod
    def _record(memory_id: str, text: str, stamp: str) -> dict[str, Any]:
        return {"id": memory_id, "type": "decision", "scope": "user", "subject": "Roy", "text": text,
                "source": "explicit", "source_refs": [], "confidence": "high", "sensitivity": "low",
                "tags": ["bench"], "created_at": stamp, "updated_at": stamp, "last_used_at": None}

    def _write(self, document: dict[str, Any]) -> None:
        _write_durably(self.path, json.dumps(document, indent=2, ensure_ascii=False).encode())

    def _read(self) -> dict[str, Any]:
        return dict(json.loads(self.path.read_text(encoding="utf-8")))

    def _change(self, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        with open(self.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            document = self._read()
            document["memories"] = change(document["memories"])
            self._write(document)

    def remember(self, text: str) -> None:
        wanted = " ".join(text.split()).lower()
        stamp = datetime.now(UTC).isoformat()

        def change(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for memory in memories:
                if " ".join(memory["text"].split()).lower() == wanted:
                    memory["text"], memory["updated_at"] = text, stamp
                    return memories
            day = f"mem_{stamp[:10].replace('-', '')}_"
            taken = {memory["id"] for memory in memories}
            index = next(n for n in itertools.count(1) if f"{day}{n:03d}" not in taken)
            return [*memories, self._record(f"{day}{index:03d}", text, stamp)]

        self._change(change)

    def forget(self, memory_id: str) -> None:
        self._change(lambda memories: [memory for memory in memories if memory["id"] != memory_id])

    def forget_text(self, text: str) -> None:
        wanted = " ".join(text.split()).lower()
        self._change(lambda memories: [memory for memory in memories
                                       if wanted not in " ".join(memory["text"].split()).lower()])

    def startup(self) -> None:
        _startup_by_sorting(self._read()["memories"], stamp="updated_at")

    def recall(self, query: str) -> None:
        _recall_by_sorting(self._read()["memories"], query)


def _write_durably(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _startup_by_sorting(facts: list[dict[str, Any]], *, stamp: str = "updated_at") -> None:
    rank = {"high": 3, "medium": 2, "low": 1}
    ordered = sorted(facts, key=lambda f: (rank[f["confidence"]], f[stamp]), reverse=True)
    budget = SETTINGS.context_chars
    for fact in ordered:
        if len(fact["text"]) + 3 > budget:
            break
        budget -= len(fact["text"]) + 3


def _recall_by_sorting(facts: list[dict[str, Any]], query: str) -> None:
    words = set(_TOKEN.findall(query.lower()))
    scored = sorted(facts, key=lambda f: len(words & set(_TOKEN.findall(f["text"].lower()))), reverse=True)
    del scored[SETTINGS.recall_k:]


def _median_s(operation: Callable[[int], object], count: int) -> float:
    samples = []
    for n in range(count):
        started = time.perf_counter()
        operation(n)
        samples.append(time.perf_counter() - started)
    return median(samples)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def _mean_s_together(enact: _Enact, rng: random.Random, *, first: int) -> float:
    """Seconds per remember, ``CLIENTS`` at a time, the mean over a little
    more than the actor's index commit delay from the first commit of the
    burst, so that one index commit falls inside at its real rate."""
    texts = (_text(rng, first + n) for n in itertools.count())
    enact.index_committed_at = time.monotonic()  # the burst's first commit starts the actor's timer
    spent = 0.0
    done = 0
    while True:
        group = [next(texts) for _ in range(CLIENTS)]
        started = time.perf_counter()
        committed_index = enact.remember_together(group)
        spent += time.perf_counter() - started
        done += CLIENTS
        if committed_index:
            break
    mean = spent / done
    enact.since_commit = 0
    return mean


def _measure(enact: _Enact, original: _Original, lean: _LeanJson, texts: list[str], *, size: int, ops: int,
             rng: random.Random) -> list[tuple[str, float, float, float]]:
    """(operation, enact, the original's way, lean JSON: median seconds) at one size."""
    baseline_ops = max(3, min(ops, 100_000 // size))
    queries = [" ".join(rng.choice(_WORDS) for _ in range(4)) + "?" for _ in range(ops)]
    fresh = [_text(rng, size + n) for n in range(ops)]
    startup_ids = enact.startup()

    def both(operation: Callable[[_Original | _LeanJson, int], object], count: int) -> tuple[float, float]:
        return (_median_s(lambda n: operation(original, n), count), _median_s(lambda n: operation(lean, n), count))

    remember_new = both(lambda way, n: way.remember(fresh[n]), baseline_ops)
    rows = [
        ("remember (new)", _median_s(lambda n: enact.remember(fresh[n]), ops), *remember_new),
        ("remember (merging)", _median_s(lambda n: enact.remember(texts[n].upper()), ops),
         *both(lambda way, n: way.remember(texts[n].upper()), baseline_ops)),
        ("forget", _median_s(lambda n: enact.forget(f"f-{n + ops:08x}"), ops),
         _median_s(lambda n: original.forget(f"mem_20261201_{n + ops + 1:03d}"), baseline_ops),
         _median_s(lambda n: lean.forget(f"m{n + ops}"), baseline_ops)),
        ("forget (by text)", _median_s(lambda n: enact.forget_text(texts[n + 2 * ops].upper()), ops),
         *both(lambda way, n: way.forget_text(texts[n + 2 * ops].upper()), baseline_ops)),
        ("startup context", _median_s(lambda n: enact.startup(), max(3, ops // 20)),
         *both(lambda way, n: way.startup(), max(3, baseline_ops // 20))),
        ("recall", _median_s(lambda n: enact.recall(queries[n], startup_ids), ops),
         *both(lambda way, n: way.recall(queries[n]), baseline_ops)),
    ]
    # Last, as it adds thousands of facts; shown beside the other remember.
    together = _mean_s_together(enact, rng, first=size + ops)
    rows.insert(1, (f"remember (new), {CLIENTS} clients at once", together, *remember_new))
    return rows


def run(quick: bool) -> Table:
    # --quick is the suite's smoke test: every path once, on counts that
    # cost little (the original's way rewrites its whole JSON document per
    # operation), each daemon started once
    sizes = [100, 300] if quick else [1_000, 10_000, 100_000]
    daemon_sizes = [0, 300] if quick else [0, 10_000, 100_000]
    ops = 10 if quick else 200
    starts = 1 if quick else 2
    rng = random.Random(8)
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    table = Table(TITLE, ["facts", "operation", "enact ms", "original's way ms", "÷ enact", "lean JSON ms",
                          "÷ enact"])
    verdicts: list[str] = []
    try:
        daemons = [(0, memory_daemon.figures(directory / "enact-0", 0, _WORDS, starts=starts))]
        for size in sizes:
            texts = [_text(rng, n) for n in range(size)]
            enact = _Enact(directory / f"enact-{size}", texts)
            original = _Original(directory / f"original-{size}", texts)
            lean = _LeanJson(directory / f"lean-{size}", texts)
            measured = _measure(enact, original, lean, texts, size=size, ops=ops, rng=rng)
            for name, ours, theirs, leaner in measured:
                table.add(f"{size:,}", name, _ms(ours), _ms(theirs), ratio(theirs / ours), _ms(leaner),
                          ratio(leaner / ours))
                if size == sizes[-1] and name in ("startup context", "recall"):
                    verdicts.append(f"{name} at {size:,} facts: {_ms(ours)} ms (target ≤ {_ms(CONTEXT_TARGET_S)} "
                                    f"ms) {memory_daemon.verdict(ours, CONTEXT_TARGET_S)}")
            table.add(f"{size:,}", "index rebuild (whole)", _ms(enact.rebuild_s), *("",) * 4)
            enact.close()
            if size in daemon_sizes:
                daemons.append((size, memory_daemon.figures(directory / f"enact-{size}", size, _WORDS, starts=starts)))
        blank = ("",) * 4
        for size, figures in daemons:
            where = f"{size:,}"
            table.add(where, f"daemon with {size:,} facts and turns: start until it answers", _ms(figures.ready_s),
                      *blank)
            table.add(where, "… then until its memory answers", _ms(figures.memory_after_s), *blank)
            table.add(where, "… a context with recall over the socket (p50)", _ms(figures.context_p50_s), *blank)
            table.add(where, "daemon RSS once memory answers, MB (its own)",
                      f"{figures.rss_mb:,.1f} ({figures.anon_mb:,.1f})", *blank)
            table.add(where, f"… after {memory_daemon.WORK_CONTEXTS} contexts, {memory_daemon.WORK_REMEMBERS} "
                      "remembers", f"{figures.worked_rss_mb:,.1f} ({figures.worked_anon_mb:,.1f})", *blank)
            verdicts.append(f"daemon RSS with {size:,} facts and turns: {figures.rss_mb:,.1f} MB (target ≤ "
                            f"{memory_daemon.RSS_TARGET_MB:.0f} MB) "
                            f"{memory_daemon.verdict(figures.rss_mb, memory_daemon.RSS_TARGET_MB)}")
        size, figures = daemons[-1]
        verdicts.append(f"a restart with {size:,} facts: memory answers {figures.memory_after_s:.3f} s after the "
                        f"daemon (target ≤ {memory_daemon.MEMORY_AFTER_DAEMON_TARGET_S} s) "
                        f"{memory_daemon.verdict(figures.memory_after_s, memory_daemon.MEMORY_AFTER_DAEMON_TARGET_S)}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for line in verdicts:
        table.note(line)
    table.note(f"median of {ops} operations (enact) and of up to {ops} (the baselines: fewer at large sizes, "
               "each rewrites the whole list); enact commits LMDB durably per operation and the index once per "
               f"{INDEX_GROUP} operations (its share included)")
    table.note("the original's way: the original agent's store as it works (lock, read and parse the whole "
               "document with the standard library's json, change, write it whole indented, fsync, rename; ids "
               "the first free index of the day); lean JSON: a cheaper way than the original's (the list kept "
               "in memory, orjson, only the write on disk), to show what the file alone costs")
    table.note(f"remember (new), {CLIENTS} clients at once: as the daemon serves asks that arrive together, each "
               "message's work then one group commit for all (the actor's WriteBatch), the index committed on the "
               "actor's 1 s timer; the mean over a burst up to and including its first index commit (measured last, "
               "after the other rows); its baselines are the same remember (new), which have no group commit")
    table.note("forget (by text): the selector is a fact's text in capitals (enact: the normalised-text lookup; "
               "the baselines compare it with every fact's)")
    table.note("startup context: a fresh selection, as for a new session, from the ranking the book keeps as facts "
               "are written (the actor also keeps the selection between changes)")
    table.note("recall: one BM25 top-k search and the selection, the startup context's facts "
               "left out")
    table.note("daemon: `enact daemon run` on a home holding that many facts and logged turns (0: a fresh home), "
               "started twice, the better figures kept (other work shares the machine); RSS read from /proc once "
               "its memory answers a `memory list`, and after the work; in brackets its own part (RssAnon), the "
               "rest mapped files: the libraries, and the LMDB and index pages read, which the kernel can take "
               "back. Before issue 24: 211 MB with 108,760 facts (180 MB at 20,000), idle 55 MB plus the console's "
               "8 MB, memory answering 1.5 s after the daemon at 100,000 facts")
    return table

