"""Durable appends to an LMDB append log vs rewriting one JSON file per change.

The baseline is the original agent's storage strategy: all records so far in
one JSON file, rewritten atomically on every change (write a temp file,
fsync it, rename it over the old one, fsync the directory). Its cost grows
with the file, so each size is measured the same way on both sides: the
store is pre-filled to ``size - window`` records (one write, not timed), then
the last ``window`` appends up to ``size`` are timed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from bench._table import Table, median, rate, ratio
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.storage import AppendLog, Storage, Store

TITLE = "3. Durable appends: LMDB AppendLog vs rewriting a JSON file per change"
GROUP = 100
_COMMITS = (("single (append, 1 per commit)", 1), (f"grouped (append_many, {GROUP} per commit)", GROUP))


def _record(sequence: int) -> dict[str, Any]:
    return {"seq": sequence, "at": 1_700_000_000.0 + sequence, "kind": "turn", "text": "x" * 64}


def _lmdb_appends_per_s(home: Path, size: int, window: int, *, group: int) -> float:
    """Appends/s with ``group`` appends per durable commit (1: each its own)."""
    home.mkdir(mode=0o700)
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)  # every write runs the fence guard, as in the daemon
    try:
        store: Store = storage.grant("bench", ["bench.log"])
        log: AppendLog = store.log("bench.log")
        records = [_record(n) for n in range(1, size + 1)]
        prefill, timed = records[: size - window], records[size - window :]
        if prefill:
            store.write(lambda txn: log.append_many(txn, prefill))
        started = time.perf_counter()
        if group == 1:
            for record in timed:
                store.write(partial(log.append, document=record))
        else:
            for i in range(0, window, group):
                store.write(partial(log.append_many, documents=timed[i : i + group]))
        elapsed = time.perf_counter() - started
        assert store.read(log.last_cursor) == size
        return window / elapsed
    finally:
        fence.release()
        storage.close()


def _rewrite_atomically(path: Path, records: list[dict[str, Any]]) -> None:
    temporary = path.with_suffix(".tmp")
    with open(temporary, "wb") as file:
        file.write(orjson.dumps(records))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _json_appends_per_s(directory: Path, size: int, window: int) -> float:
    directory.mkdir()
    path = directory / "records.json"
    records = [_record(n) for n in range(1, size - window + 1)]
    _rewrite_atomically(path, records)
    started = time.perf_counter()
    for sequence in range(size - window + 1, size + 1):
        records.append(_record(sequence))
        _rewrite_atomically(path, records)
    elapsed = time.perf_counter() - started
    assert len(orjson.loads(path.read_bytes())) == size
    return window / elapsed


def run(quick: bool) -> Table:
    # (records at the end, appends timed on the way there)
    sizes = [(1_000, 100), (10_000, 100)] if quick else [(1_000, 1_000), (10_000, 1_000)]
    repeats = 1 if quick else 3
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    table = Table(TITLE, ["records", "enact commit", "enact appends/s", "JSON rewrite appends/s", "enact ÷ JSON"])
    try:
        for size, window in sizes:
            json_runs: list[float] = []
            lmdb_runs: dict[int, list[float]] = {group: [] for _, group in _COMMITS}
            for repeat in range(repeats):  # interleaved, each on a fresh file or environment
                json_runs.append(_json_appends_per_s(directory / f"json-{size}-{repeat}", size, window))
                for group, runs in lmdb_runs.items():
                    runs.append(_lmdb_appends_per_s(directory / f"lmdb-{size}-{group}-{repeat}", size, window,
                                                    group=group))
            baseline = median(json_runs)
            for name, group in _COMMITS:
                appends = median(lmdb_runs[group])
                table.add(f"{size:,}", name, rate(appends), rate(baseline), ratio(appends / baseline))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    table.note(f"median of {repeats} interleaved run(s) of each")
    for size, window in sizes:
        start = size - window
        table.note(f"{size:,} records: pre-filled to {start:,} (untimed), then appends {start + 1:,}→{size:,} timed")
    table.note("both sides durable per commit (LMDB: fsync on commit, with the fence guard; JSON: temp file fsync, "
               "rename, directory fsync); the JSON side keeps its records in memory and encodes with orjson, "
               "which favours it; the same JSON figure serves both rows of a size")
    return table
