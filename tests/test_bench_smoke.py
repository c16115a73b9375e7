"""`python -m bench --quick` runs every benchmark, so none can rot unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADINGS = (
    "1. Control socket: control.Status round trip",
    "2. Typed-message dispatch: Supervisor.ask vs bare pykka ask",
    "3. Durable appends: LMDB AppendLog vs rewriting a JSON file",
    "4. Chat end to end: events/s and send latency vs JSON files",
    "5. CLI start-up: time until a command reaches the daemon",
    "6. Memory: remember, forget, startup context and recall vs one JSON list",
    "7. Runtime adapter overhead: each adapter vs the same call made directly",
    "8. Telegram channel: events/s and latency per event beside the local channel",
    "9. Task queue: LMDB TaskQueue vs one JSON file rewritten per change",
    "10. Task workers: trivial tasks completed per minute",
    "11. Evidence scan: one feedback batch with 10k and 100k turns of history already scanned",
)


def test_quick_bench_runs_and_prints_every_comparison() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    for heading in HEADINGS:
        assert heading in result.stdout, f"{heading!r} missing from:\n{result.stdout}"
