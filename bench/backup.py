"""A backup of a home with 100,000 turns, 20,000 facts and 10,000 tasks,
and chat's events/s while backups run beside it.

enact: ``enact.backup.snapshot.create`` on the open environment of a home
whose chat actors run in this process (``bench.chat``'s home: its history is
the 100,000 finished events, receipts, deliveries and turns, written
through the actors' own records), with 20,000 facts and 10,000 task-sized
documents added through their owners' stores: LMDB's compacted copy from
one read transaction, the home's files, every file's sha256, the manifest.
Baseline: a plain copy of ``data.mdb`` (not consistent while writers run,
and not compacted), the floor a backup cannot beat.

Chat: events/s with 8 conversations, as ``bench.chat`` measures them,
without a backup and while backups are taken back to back beside it.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import lmdb

from bench import chat
from bench._table import Table, median, rate, ratio
from enact.backup.snapshot import create, load_settings
from enact.home import STATE_DIR
from enact.memory.admission import Candidate, Refusal, admit, new_fact
from enact.memory.book import FACTS
from enact.memory.fact_records import encode_fact
from enact.memory.facts import Fact, FactState
from enact.storage import encode_document
from enact.tasks.tables import QUEUE

TITLE = "12. Backup: a home of 100k turns, 20k facts, 10k tasks; chat events/s while a backup runs"
CONVERSATIONS = 8
_GROUP = 5_000


def _add_facts(storage: chat.Storage, count: int) -> None:
    store = storage.grant("memory", (FACTS,))
    handle = store.handle(FACTS)
    rng = random.Random(7)
    now = time.time()
    for first in range(0, count, _GROUP):
        rows = []
        for n in range(first, min(count, first + _GROUP)):
            admitted = admit(Candidate(text=f"fact {n}: the owner likes {rng.random():.12f}", origin="human-cli",
                                       tags=("bench",)), max_chars=500)
            assert not isinstance(admitted, Refusal)
            rows.append(new_fact(admitted, fact_id=f"f-{n:08x}", state=FactState.ACTIVE, now=now + n))

        def write(txn: lmdb.Transaction, rows: list[Fact] = rows) -> None:
            for fact in rows:
                txn.put(fact.id.encode(), encode_fact(fact), db=handle)

        store.write(write)


def _add_tasks(storage: chat.Storage, count: int) -> None:
    """Task-sized documents (about what a queued task record holds)."""
    store = storage.grant("tasks", (QUEUE,))
    handle = store.handle(QUEUE)
    for first in range(0, count, _GROUP):
        def write(txn: lmdb.Transaction, first: int = first) -> None:
            for n in range(first, min(count, first + _GROUP)):
                document = {"id": n + 1, "request": f"task {n}: tidy the notes " * 4, "brief": "do it well " * 20,
                            "repo": "/home/owner/src/project", "state": "completed", "origin": "human-cli",
                            "created_at": 1.7e9 + n, "updated_at": 1.7e9 + n, "attempts": 1}
                txn.put((n + 1).to_bytes(8, "big"), encode_document(document, version=2), db=handle)

        store.write(write)


def run(quick: bool) -> Table:
    turns, facts, tasks = (2_000, 400, 200) if quick else (100_000, 20_000, 10_000)
    per_conversation, trials = (5, 1) if quick else (40, 3)
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    try:
        home = directory / "home"
        enact = chat._Enact(home, history=turns)
        try:
            _add_facts(enact.storage, facts)
            _add_tasks(enact.storage, tasks)
            settings = load_settings(home)
            enact.warm_up(2)
            size = (home / STATE_DIR / "data.mdb").stat().st_size
            plain, made = [], []
            for trial in range(trials):
                started = time.perf_counter()
                shutil.copyfile(home / STATE_DIR / "data.mdb", directory / f"plain-{trial}.mdb")
                plain.append(time.perf_counter() - started)
                started = time.perf_counter()
                backup = create(home, enact.storage, reason="bench", settings=settings, to=directory / f"b{trial}")
                made.append(time.perf_counter() - started)
            copied = backup.manifest.files["state/data.mdb"].size
            without, beside, during = [], [], []
            for trial in range(trials):
                without.append(enact.events_per_s(CONVERSATIONS, per_conversation))
                done = threading.Event()

                def backups(trial: int = trial, done: threading.Event = done) -> None:
                    n = 0
                    while not done.is_set():
                        create(home, enact.storage, reason="bench", settings=settings,
                               to=directory / f"beside-{trial}-{n}")
                        shutil.rmtree(directory / f"beside-{trial}-{n}")
                        n += 1
                    during.append(n)

                thread = threading.Thread(target=backups)
                thread.start()
                try:
                    beside.append(enact.events_per_s(CONVERSATIONS, per_conversation))
                finally:
                    done.set()
                    thread.join()
        finally:
            enact.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    table = Table(TITLE, ["figure", "baseline", "enact", "enact ÷ baseline"])
    table.add("backup, s (baseline: copy data.mdb)", f"{median(plain):.2f}", f"{median(made):.2f}",
              ratio(median(made) / median(plain)))
    table.add(f"chat events/s, {CONVERSATIONS} conversations (baseline: no backup)", rate(median(without)),
              rate(median(beside)), ratio(median(beside) / median(without)))
    table.note(f"{turns:,} turns, {facts:,} facts, {tasks:,} tasks: data.mdb {size / 1e6:,.1f} MB, its compacted "
               f"copy {copied / 1e6:,.1f} MB; median of {trials}")
    table.note(f"while chat ran, backups were taken back to back: {sum(during)} in {trials} runs")
    return table
