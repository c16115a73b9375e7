"""The task queue: enact's TaskQueue on LMDB vs one JSON file per change.

The baseline keeps the queue the original agent's way: one JSON file holding
the pending tasks and the full history (each task with its events), locked,
read, parsed and rewritten atomically (temp file, fsync, rename, directory
fsync) on every change. Both sides hold the same tasks (the same request,
brief and events); enact's side runs the TaskQueue with the epoch fence's
guard on every write, as in the daemon (an actor's ask adds about 60 µs).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench._table import Table, median, ratio
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages.tasks import Claimed, Finish, Found, ReportPhase, Submit
from enact.storage import Storage
from enact.tasks.queue import TaskQueue
from enact.tasks.records import Outcome, Phase
from enact.tasks.tables import DATABASES

TITLE = "9. Task queue: LMDB TaskQueue vs one JSON file rewritten per change"
REQUEST = "Make the retry back-off configurable and cover it with a test. " * 3
BRIEF = ("Intended outcome: the back-off is read from config. Decisions: keep the default. " * 12)[:1_000]
_PHASES = (Phase.WORKSPACE, Phase.MODEL, Phase.VALIDATE, Phase.CAPTURE, Phase.REVIEW)
_HEARTBEATS = 3


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def _timed(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return median(samples)


# -- enact -------------------------------------------------------------------


def _run_one(queue: TaskQueue, worker: str, now: float, *, heartbeats: int) -> None:
    """One task's whole life on the queue: claim, phases, heartbeats, finish."""
    claimed = queue.claim(worker, now)
    if not isinstance(claimed, Claimed):
        raise RuntimeError(f"nothing to claim: {claimed}")
    task = claimed.task
    for phase in _PHASES:
        queue.report_phase(ReportPhase(task_id=task.id, worker_id=worker, attempt=task.attempt, phase=phase), now)
    for _ in range(heartbeats):
        queue.heartbeat(task.id, worker, task.attempt, now)
    queue.finish(Finish(task_id=task.id, worker_id=worker, attempt=task.attempt, outcome=Outcome.SUCCEEDED,
                        summary="one line changed", review_id=f"r{task.id}"), now)


def _submit(queue: TaskQueue, now: float) -> None:
    queue.submit(Submit(request=REQUEST, brief=BRIEF, repo="/repo", origin="human-cli"), now)


def _enact(home: Path, history: int, repeats: int) -> dict[str, float]:
    home.mkdir(mode=0o700)
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    try:
        queue = TaskQueue(storage.grant("tasks", DATABASES), default_repo="/repo", lease_ttl_s=60.0)
        now = time.time()
        for _ in range(history):  # the history: each task queued, run and finished (untimed)
            _submit(queue, now)
            _run_one(queue, "w1", now, heartbeats=0)
        queue.take_changes()
        figures = {"enqueue": _timed(lambda: _submit(queue, now), repeats)}
        bare = storage.grant("bench", ["bench.commit"])
        handle = bare.handle("bench.commit")
        figures["commit"] = _timed(lambda: bare.write(lambda txn: txn.put(b"k", b"v", db=handle)), repeats)
        started = time.perf_counter()
        for _ in range(repeats):
            _run_one(queue, "w1", now, heartbeats=_HEARTBEATS)
        figures["overhead"] = (time.perf_counter() - started) / repeats
        figures["list"] = _timed(lambda: queue.list(None, 20, None), repeats)
        middle = max(1, history // 2)

        def show() -> None:
            found = queue.get(middle)
            if not isinstance(found, Found):
                raise RuntimeError(f"task {middle} is missing")
            queue.events(middle, 0, 1000)

        figures["show"] = _timed(show, repeats)
        queue.take_changes()
        return figures
    finally:
        fence.release()
        storage.close()


# -- the baseline --------------------------------------------------------------


def _job(task_id: int, now: float) -> dict[str, Any]:
    events = [{"kind": kind, "time": now, "worker": "w1", "attempt": 1, "summary": ""}
              for kind in ("queued", "claimed", *(p.value for p in _PHASES), "succeeded")]
    return {"id": task_id, "request": REQUEST, "brief": BRIEF, "repo": "/repo", "origin": "human-cli",
            "idempotency_key": f"fresh:{task_id}", "repairs": 2, "deadline_s": 600, "attempt": 1, "parent": None,
            "state": "succeeded", "phase": "", "confined": True, "review_id": f"r{task_id}", "worktree": "",
            "created_at": now, "updated_at": now, "finished_at": now, "events": events}


class _JsonQueue:
    """The original's queue file: ``pending``, one ``running`` slot, the whole
    ``history`` and ``next_id``, all in one document, encoded with ``codec``."""

    def __init__(self, path: Path, codec: tuple[Callable[[Any], bytes], Callable[[bytes], Any]]) -> None:
        self.path = path
        self.lock = path.with_suffix(".lock")
        self.dumps, self.loads = codec

    def _change(self, change: Callable[[dict[str, Any]], None]) -> None:
        with open(self.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            document = self.loads(self.path.read_bytes())
            change(document)
            temporary = self.path.with_suffix(".tmp")
            with open(temporary, "wb") as file:
                file.write(self.dumps(document))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def _read(self) -> dict[str, Any]:
        with open(self.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            document: dict[str, Any] = self.loads(self.path.read_bytes())
            return document

    def enqueue(self, now: float) -> None:
        def change(document: dict[str, Any]) -> None:
            job = {**_job(document["next_id"], now), "state": "pending", "events": []}
            document["next_id"] += 1
            document["pending"].append(job)

        self._change(change)

    def first_page(self) -> list[dict[str, Any]]:
        document = self._read()
        everything = [*document["pending"], *([document["running"]] if document["running"] else []),
                      *document["history"]]
        return sorted(everything, key=lambda job: job["id"], reverse=True)[:20]

    def show(self, task_id: int) -> dict[str, Any]:
        document = self._read()
        return next(job for job in document["history"] if job["id"] == task_id)


_STDLIB_JSON = (lambda document: json.dumps(document).encode(), json.loads)
_ORJSON = (orjson.dumps, orjson.loads)


def _baseline(directory: Path, history: int, repeats: int,
              codec: tuple[Callable[[Any], bytes], Callable[[bytes], Any]]) -> dict[str, float]:
    directory.mkdir()
    now = time.time()
    path = directory / "task_queue.json"
    path.write_bytes(orjson.dumps({"next_id": history + 1, "pending": [], "running": None,
                                   "history": [_job(n, now) for n in range(1, history + 1)]}))
    queue = _JsonQueue(path, codec)
    return {
        "enqueue": _timed(lambda: queue.enqueue(now), repeats),
        "list": _timed(queue.first_page, repeats),
        "show": _timed(lambda: queue.show(max(1, history // 2)), repeats),
        "size": float(path.stat().st_size),
    }


def run(quick: bool) -> Table:
    sizes = [100, 300] if quick else [1_000, 10_000]
    repeats = 5 if quick else 30
    baseline_repeats = 3 if quick else 9
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    table = Table(TITLE, ["tasks in history", "operation", "JSON file ms", "orjson file ms", "enact ms",
                          "JSON ÷ enact", "orjson ÷ enact"])
    notes: list[str] = []
    try:
        for size in sizes:
            # The baseline's figures are seconds each at 10,000: fewer runs suffice.
            baseline = _baseline(directory / f"json-{size}", size, baseline_repeats, _STDLIB_JSON)
            faster = _baseline(directory / f"orjson-{size}", size, baseline_repeats, _ORJSON)
            enact = _enact(directory / f"lmdb-{size}", size, repeats)
            for operation, label in (("enqueue", "enqueue (task add)"), ("list", "task list, first page (20)"),
                                     ("show", "task show (task and its events)")):
                table.add(f"{size:,}", label, _ms(baseline[operation]), _ms(faster[operation]),
                          _ms(enact[operation]), ratio(baseline[operation] / enact[operation]),
                          ratio(faster[operation] / enact[operation]))
            notes.append(f"{size:,} tasks: the JSON file is {baseline['size'] / (1 << 20):.1f} MiB; queue overhead "
                         f"per task {enact['overhead'] * 1e3:.2f} ms (claim, {len(_PHASES)} phase reports, "
                         f"{_HEARTBEATS} heartbeats, finish: {len(_PHASES) + _HEARTBEATS + 2} durable commits, "
                         f"{len(_PHASES) + 2} events); one bare durable commit {enact['commit'] * 1e3:.2f} ms")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for note in notes:
        table.note(note)
    table.note(f"median of {repeats} runs of enact, {baseline_repeats} of each baseline; both sides durable per "
               "change (LMDB: fsync on commit, with the fence guard; JSON: flock, parse, temp file fsync, rename, "
               "directory fsync); \"JSON\" encodes with Python's json module, as the original does, \"orjson\" "
               "with orjson, which favours the baseline")
    return table
