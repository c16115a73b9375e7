"""The benchmarks' daemons: started as a user starts one, on a home of the
benchmark's own, with none of the caller's ``ENACT_*`` settings, and ready
once it answers ``control.Status`` as the process just started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from enact.cli._client import Client, NotRunning
from enact.messages.control import Status, StatusReport

READY_TIMEOUT_S = 30.0


def start_daemon(home: Path, log: Path, settings: dict[str, str] | None = None,
                 cwd: Path | None = None, prefix: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """``enact daemon run`` on ``home`` with ``settings`` (``ENACT_*``
    variables), its output in ``log``; returned once it answers. ``prefix``
    runs it through a program that execs it (``nsenter``: its pid is the
    daemon's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env.update(settings or {}, ENACT_HOME=str(home))
    with open(log, "wb") as out:
        process = subprocess.Popen([*prefix, sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr",
                                    "127.0.0.1:0"],
                                   env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daemon exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with Client(home, timeout=2) as client:
                report = client.request(Status(brief=True))
            if isinstance(report, StatusReport) and report.pid == process.pid:
                return process
        except (NotRunning, OSError):
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"daemon not ready within {READY_TIMEOUT_S:.0f} s:\n{log.read_text(errors='replace')}")


def stop_daemon(process: subprocess.Popen[bytes]) -> int:
    """Stop it as the service manager would (SIGTERM), killing it if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=10)
