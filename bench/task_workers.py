"""Task workers: trivial tasks completed per minute with 1, 2 and 4 workers.

A trivial task: a tiny repository whose one test runs in well under a
second, the scripted runtime appending one line. enact: a real daemon with
``daemon.workers`` = N, every task submitted at once over the control
socket, timed from the first submission to the last task's end; each task
goes through the whole path (worktree, runtime, doctor, capture, review).
Baseline: the same steps done by hand in a plain loop, one task after
another, in this process (no daemon, no queue, no review): the floor a
single worker cannot beat.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._daemons import start_daemon
from bench._table import Table, ratio
from enact import components, config
from enact.cancellation import CancellationToken
from enact.cli._client import request
from enact.messages.tasks import List, Submit, Submitted, TaskPage
from enact.tasks import worktrees
from enact.tasks.settings import TasksSettings
from enact.tasks.validation import Validation

TITLE = "10. Task workers: trivial tasks completed per minute with 1, 2 and 4 workers"
_ROOT = Path(__file__).resolve().parent.parent
_RULES = '[[rule]]\npurpose = "task"\nmatch = "."\nrun = ["sh", "-c", "echo \'# touched\' >> lib.py"]\nreply = "done"\n'
_GIT = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    files = {
        "lib.py": "def answer():\n    return 42\n",
        # unittest, not pytest: pytest's start-up alone would be most of a trivial task.
        "test_lib.py": "import unittest\n\nfrom lib import answer\n\n\nclass Answer(unittest.TestCase):\n"
                       "    def test_answer(self):\n        self.assertEqual(answer(), 42)\n",
        ".enact.toml": f'[doctor]\ncommand = "{sys.executable} -m unittest -q"\n',
        ".gitignore": "__pycache__/\n",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {**os.environ, **_GIT}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def _start(home: Path, workers: int, confinement: str) -> subprocess.Popen[bytes]:
    return start_daemon(home, home.parent / "daemon.log", cwd=_ROOT,
                        settings={"ENACT_DAEMON_WORKERS": str(workers), "ENACT_TASKS_CONFINEMENT": confinement})


def tasks_per_minute(home: Path, repo: Path, count: int, *, name: str, patience_s: float) -> float:
    """Submit ``count`` one-line tasks to the daemon on ``home`` and time them
    until every one has ended; each must have succeeded."""
    started = time.perf_counter()
    for n in range(count):
        reply = request(home, Submit(request=f"touch {n}", repo=str(repo), origin="human-cli"))
        if not isinstance(reply, Submitted):
            raise RuntimeError(f"submission refused: {reply}")
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        page = request(home, List(limit=count))
        if isinstance(page, TaskPage) and all(task.state.ended for task in page.tasks):
            break
        time.sleep(0.02)
    else:
        raise RuntimeError(f"{name}: tasks did not end in time")
    elapsed = time.perf_counter() - started
    failed = [task for task in page.tasks if task.state.value != "succeeded"]
    if failed:
        raise RuntimeError(f"{name}: {len(failed)} tasks did not succeed: {failed[0].summary}")
    return count / elapsed * 60


def _daemon_per_minute(base: Path, workers: int, count: int, confinement: str) -> float:
    home = base / f"h{workers}{confinement}"
    home.mkdir(mode=0o700)
    (home / "scripted.toml").write_text(_RULES)
    repo = _repo(base / f"repo{workers}{confinement}")
    process = _start(home, workers, confinement)
    try:
        return tasks_per_minute(home, repo, count, name=f"{workers} workers", patience_s=60 + 10 * count)
    finally:
        process.terminate()
        process.wait(30)


def _baseline_per_minute(base: Path, count: int) -> float:
    """The same steps by hand: worktree, one-line change, doctor, commit."""
    home = base / "baseline"
    home.mkdir()
    repo = _repo(base / "repo-baseline")
    settings = config.load(home, environ={}, settings=components.load().settings()).typed(TasksSettings)
    started = time.perf_counter()
    for task_id in range(1, count + 1):
        tree = worktrees.prepare(repo, home, task_id)
        subprocess.run(["sh", "-c", "echo '# touched' >> lib.py"], cwd=tree.path, check=True)
        changed = worktrees.changed_paths(tree)
        validation = Validation.against(tree.repo, tree.base, home=home, settings=settings)
        result = validation.check(tree.path, log_path=home / "log", cancel=CancellationToken(), changed=changed)
        if not result.passed:
            raise RuntimeError(result.summary)
        worktrees.capture(tree, f"touch {task_id}", worktrees.changed_paths(tree))
        worktrees.remove(tree, home, delete_branch=False)
    return count / (time.perf_counter() - started) * 60


def run(quick: bool) -> Table:
    count = 2 if quick else 24
    table = Table(TITLE, ["workers", "baseline tasks/min", "enact tasks/min", "enact ÷ baseline", "vs 1 worker"])
    base = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    try:
        baseline = _baseline_per_minute(base, count)
        single = 0.0
        # --quick (the suite's smoke test): one daemon goes the whole path
        rows = [(2, "off")] if quick else [(1, "off"), (2, "off"), (4, "off")]
        if not quick and shutil.which("bwrap"):
            rows.append((2, "auto"))
        for workers, confinement in rows:
            per_minute = _daemon_per_minute(base, workers, count, confinement)
            single = single or per_minute
            label = f"{workers}" + (" (confined, bwrap)" if confinement == "auto" else "")
            table.add(label, f"{baseline:,.0f}", f"{per_minute:,.0f}", ratio(per_minute / baseline),
                      ratio(per_minute / single))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table.note(f"{count} tasks per row, submitted at once; {os.cpu_count()} CPUs shared with the rest of the machine; "
               "each task starts git, sh and a Python doctor (unittest) as processes, so throughput stops growing "
               "once the cores are busy")
    return table
