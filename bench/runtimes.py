"""What the codex adapter adds around a call: the real Codex CLI against an
instant loopback model, called by the adapter (``sh`` in its own session,
a temporary last-message file, JSON-lines parsing, the resume bookkeeping)
and called directly with ``subprocess.run`` and the same argv. The model's
own time is the same on both sides (the server answers at once), so the
difference is enact's. Skipped when ``make tools`` has not installed Codex.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench._table import Table, median, ratio
from enact.cancellation import CancellationToken
from enact.runtime import RuntimeRequest
from enact.runtime._subprocess import run_command
from enact.runtime.codex import CodexRuntime

TITLE = "7. Runtime adapter overhead: the codex adapter vs the same CLI called directly"
ROOT = Path(__file__).resolve().parent.parent
CODEX = ROOT / ".tools" / "node_modules" / ".bin" / "codex"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def run(quick: bool) -> Table:
    table = Table(TITLE, ["call (median of N)", "direct ms", "enact ms", "enact ÷ direct", "added ms"])
    calls = 2 if quick else 8
    spawn = _spawn_overhead(20 if quick else 200)
    table.add("spawn `true` (run_command vs subprocess)", _ms(spawn[0]), _ms(spawn[1]), ratio(spawn[1] / spawn[0]),
              _ms(spawn[1] - spawn[0]))
    if not CODEX.exists():
        table.note(f"codex rows skipped: {CODEX} is missing (run `make tools`)")
        return table
    sys.path.insert(0, str(ROOT / "tests"))
    from codex_home import codex_env, scratch_codex_home
    from model_server import ModelServer, Reply

    with ModelServer(default=Reply("ok")) as server, scratch_codex_home(server.url) as home:
        env = codex_env(home)
        runtime = CodexRuntime(lambda: str(CODEX), default_cwd=home, env=env)
        request = RuntimeRequest(session_key="", prompt="hi", timeout_s=60)
        argv = runtime.argv(str(CODEX), request, home / "last.txt")
        direct, adapter = [], []
        runtime.invoke(request)  # warm the caches of both sides
        for _ in range(calls):
            started = time.perf_counter()
            subprocess.run(argv, input="hi", capture_output=True, text=True, env=env, cwd=home, check=True,
                           start_new_session=True)  # as the adapter runs it: without a controlling terminal
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            runtime.invoke(request)
            adapter.append(time.perf_counter() - started)
    d, a = median(direct), median(adapter)
    table.add(f"isolated codex exec, N={calls}", _ms(d), _ms(a), ratio(a / d), _ms(a - d))
    table.note("the model answers at once; a real model's seconds come on top of both sides alike")
    return table


def _spawn_overhead(count: int) -> tuple[float, float]:
    direct, ours = [], []
    cancel = CancellationToken()
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run(["true"], input="", capture_output=True, text=True, check=True)
        direct.append(time.perf_counter() - started)
        started = time.perf_counter()
        run_command(["true"], stdin_text="", cwd=None, env=None, timeout_s=10, cancel=cancel)
        ours.append(time.perf_counter() - started)
    return median(direct), median(ours)
