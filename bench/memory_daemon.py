"""A real ``enact daemon run`` on a home holding facts and logged turns: its
RSS once its memory answers and after a round of work, and how long after
the daemon its memory answers (issue 24's targets), for ``bench.memory``."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._table import median
from bench.chat_home import ChatDatabases
from enact.chat import inbox_records
from enact.chat import outbox_actor as outbox
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.storage import Storage

RSS_TARGET_MB = 64.0
MEMORY_AFTER_DAEMON_TARGET_S = 0.5
WORK_CONTEXTS = 200
WORK_REMEMBERS = 100


@dataclass(frozen=True, slots=True)
class DaemonFigures:
    ready_s: float
    """From spawning the process until it answers a status."""
    memory_after_s: float
    """From then until its memory answers a listing."""
    rss_mb: float
    anon_mb: float
    """The part of the RSS that is the process's own (not mapped files)."""
    worked_rss_mb: float
    worked_anon_mb: float
    context_p50_s: float
    """A ``memory.Context`` with recall, asked over the control socket."""


def add_turns(home: Path, count: int) -> None:
    """``count`` finished chat events in the home's turn log (and their
    receipts and deliveries), written through the chat actors' own records."""
    if count == 0:
        return
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    try:
        fence.acquire(takeover=False)
        databases = ChatDatabases(storage.grant("inbox", inbox_records.DATABASES),
                                  storage.grant("outbox", outbox.DATABASES))
        databases.prefill(count, fence.generation)
    finally:
        fence.release()
        storage.close()


def _rss(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()

    def kb(name: str) -> int:
        found = re.search(rf"{name}:\s+(\d+)", status)
        return int(found.group(1)) if found else 0

    return kb("VmRSS") / 1024, kb("RssAnon") / 1024


def measure(home: Path, words: list[str]) -> DaemonFigures:
    """Start the daemon on ``home``, wait for its memory, then work it: asks
    for context with recall, remembers, the index committed."""
    from enact.cli._client import NotRunning, request
    from enact.messages.control import Status, StatusReport
    from enact.messages.memory import Context, ContextReply, FactList, List, Remember

    home.mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env["ENACT_HOME"] = str(home)
    env["ENACT_CONSOLE_ADDR"] = "127.0.0.1:0"
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the daemon exited with {process.returncode}")
            try:
                if isinstance(request(home, Status(brief=True), timeout=2), StatusReport):
                    break
            except (NotRunning, OSError):
                pass
            time.sleep(0.02)
        ready_s = time.perf_counter() - started
        if not isinstance(request(home, List(max_facts=1), timeout=120), FactList):
            raise RuntimeError("the daemon's memory did not list its facts")
        memory_after_s = time.perf_counter() - started - ready_s
        rss, anon = _rss(process.pid)
        rng = random.Random(24)
        samples = []
        for _ in range(WORK_CONTEXTS):
            query = " ".join(rng.choice(words) for _ in range(4))
            asked = time.perf_counter()
            if not isinstance(request(home, Context(query=query, owners=True), timeout=60), ContextReply):
                raise RuntimeError("the daemon's memory did not answer a context")
            samples.append(time.perf_counter() - asked)
        for n in range(WORK_REMEMBERS):
            text = f"bench worked fact {n}: the owner " + " ".join(rng.choice(words) for _ in range(6))
            request(home, Remember(text=text, origin="human-cli"), timeout=60)
        time.sleep(1.5)  # the index commits on its timer (1 s)
        worked_rss, worked_anon = _rss(process.pid)
        return DaemonFigures(ready_s=ready_s, memory_after_s=memory_after_s, rss_mb=rss, anon_mb=anon,
                             worked_rss_mb=worked_rss, worked_anon_mb=worked_anon,
                             context_p50_s=median(samples))
    finally:
        process.terminate()
        process.wait(timeout=30)


def figures(home: Path, turns: int, words: list[str], *, starts: int = 2) -> DaemonFigures:
    """A daemon on ``home`` with ``turns`` added to its turn log, started
    ``starts`` times: the lower of each figure (other work shares the
    machine)."""
    add_turns(home, turns)
    measured = [measure(home, words) for _ in range(starts)]
    return DaemonFigures(**{name: min(getattr(each, name) for each in measured)
                            for name in DaemonFigures.__dataclass_fields__})


def verdict(figure: float, target: float) -> str:
    return "PASS" if figure <= target else "MISS"
