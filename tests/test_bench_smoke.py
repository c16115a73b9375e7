"""`python -m bench --quick` runs each benchmark, so none can rot unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADINGS = {
    "control_socket": "1. Control socket: control.Status and inbox.GetOutcome round trips",
    "dispatch": "2. Typed-message dispatch: Supervisor.ask vs bare pykka ask",
    "append_log": "3. Durable appends: LMDB AppendLog vs rewriting a JSON file",
    "chat": "4. Chat end to end: events/s and send latency vs JSON files",
    "cli_startup": "5. CLI start-up: time until a command reaches the daemon",
    "memory": "6. Memory: remember, forget, startup context and recall vs one JSON list",
    "runtimes": "7. Runtime adapter overhead: each adapter vs the same call made directly",
    "telegram": "8. Telegram channel: events/s and latency per event beside the local channel",
    "tasks": "9. Task queue: LMDB TaskQueue vs one JSON file rewritten per change",
    "task_workers": "10. Task workers: trivial tasks completed per minute",
    "evolution": "11. Evidence scan: one feedback batch with 10k and 100k turns of history already scanned",
    "backup": "12. Backup: a home of 100k turns, 20k facts, 10k tasks; chat events/s while a backup runs",
    "console": "13. Console: the overview and a task page under chat load; chat with the console open and without",
    "ray_workers": "14. Ray workers: trivial tasks per minute on a Ray cluster beside local workers",
}
"""Each benchmark module (``--only`` name) and the heading its table prints."""


def test_every_benchmark_has_its_smoke_test() -> None:
    from bench.__main__ import BENCHMARKS

    assert [module.__name__.rsplit(".", 1)[-1] for module in BENCHMARKS] == list(HEADINGS)


@pytest.mark.parametrize("name", list(HEADINGS))
def test_quick_bench_runs_and_prints_its_comparison(name: str) -> None:
    """One benchmark per test, so that the suite's workers share them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert HEADINGS[name] in result.stdout, f"{HEADINGS[name]!r} missing from:\n{result.stdout}"
