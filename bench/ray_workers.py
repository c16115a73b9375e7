"""Ray workers: trivial tasks per minute with 1, 2 and 4 workers on a Ray
cluster beside the same numbers of local workers, in the same run, and
what one remote attempt's bundles cost.

The tasks are row 10's (``bench.task_workers``: a tiny repository, the
scripted runtime appending a line, a unittest doctor), each daemon's tasks
submitted at once and timed to the last one's end. The cluster is a head
with 4 CPUs on this machine, in network and mount namespaces of its own
(only loopback, a private ``/tmp/ray``: ``bench._ray_cluster``; root only),
and the daemons run inside them and find it with ``address="auto"``; each
attempt reserves one CPU. The local rows are the baseline: the same daemon
with ``daemon.workers`` = N.

The overhead per task is measured apart, in this process, on the same
repository: bundle out (the base bundled by the daemon, cloned by the node)
and bundle back (the change bundled by the node, checked and made the task
branch by the daemon), the median of the runs.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import task_workers
from bench._daemons import start_daemon, stop_daemon
from bench._ray_cluster import ADDRESS, NEEDS, RayCluster, possible
from bench._table import Table, ratio
from enact.tasks.protected import Guards
from enact.tasks.ray_bundles import bundle_base, bundle_change, clone_base, take_change
from enact.tasks.remote_attempt import node_root

TITLE = "14. Ray workers: trivial tasks per minute on a Ray cluster beside local workers"
_ROOT = Path(__file__).resolve().parent.parent
_GIT = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def _per_minute(base: Path, name: str, count: int, settings: dict[str, str], prefix: list[str]) -> float:
    home = base / f"h-{name}"
    home.mkdir(mode=0o700)
    rules = base / f"rules-{name}.toml"  # read where the attempt runs: a node's home is a scratch one
    rules.write_text(task_workers._RULES)
    repo = task_workers._repo(base / f"repo-{name}")
    process = start_daemon(home, base / f"daemon-{name}.log", cwd=_ROOT, prefix=prefix, settings={
        "ENACT_TASKS_CONFINEMENT": "off", "ENACT_SCRIPTED_RULES": str(rules), **settings})
    try:
        return task_workers.tasks_per_minute(home, repo, count, name=name, patience_s=120 + 20 * count)
    finally:
        stop_daemon(process)
        shutil.rmtree(node_root(home), ignore_errors=True)  # what the node kept for the home


def _bundle_overhead_ms(base: Path, runs: int) -> tuple[float, float]:
    """(bundle out, bundle back), the median ms of ``runs`` attempts' worth."""
    repo = task_workers._repo(base / "repo-bundles")
    home = base / "h-bundles"
    out, back = [], []
    for run in range(runs):
        started = time.perf_counter()
        _, sent = bundle_base(repo, home / "bundles")
        clone = clone_base(sent, base / f"node-{run}" / "repo")
        out.append(time.perf_counter() - started)
        subprocess.run(["git", "checkout", "-q", "-b", "task"], cwd=clone, check=True, env={**os.environ, **_GIT})
        (clone / "lib.py").write_text("def answer():\n    return 43\n")
        subprocess.run(["git", "commit", "-qam", "change"], cwd=clone, check=True, env={**os.environ, **_GIT})
        started = time.perf_counter()
        change = bundle_change(clone, "task", sent.base)
        assert change is not None
        take_change(change, home=home, task_id=run + 1, repo=repo, base=sent.base, scratch=home / "bundles",
                    guards=Guards(repo=repo, base=sent.base, patterns=("tests/",)))
        back.append(time.perf_counter() - started)
    return statistics.median(out) * 1000, statistics.median(back) * 1000


def run(quick: bool) -> Table:
    count = 2 if quick else 12
    sizes = (2,) if quick else (1, 2, 4)  # quick: each path once (the suite's smoke test)
    table = Table(TITLE, ["workers", "local tasks/min", "Ray tasks/min", "Ray ÷ local"])
    base = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    try:
        out_ms, back_ms = _bundle_overhead_ms(base, 3 if quick else 20)
        if not possible():
            table.note(f"no Ray rows: {NEEDS}")
            table.note(f"overhead per remote attempt: bundle out {out_ms:.0f} ms, bundle back {back_ms:.0f} ms")
            return table
        cluster = RayCluster(cpus=4)
        try:
            for workers in sizes:
                local = _per_minute(base, f"local{workers}", count, {"ENACT_DAEMON_WORKERS": str(workers)},
                                    cluster.enter)
                remote = _per_minute(base, f"ray{workers}", count, {
                    "ENACT_TASKS_BACKEND": "ray", "ENACT_TASKS_RAY_ADDRESS": ADDRESS,
                    "ENACT_TASKS_RAY_WORKERS": str(workers)}, cluster.enter)
                table.add(str(workers), f"{local:,.0f}", f"{remote:,.0f}", ratio(remote / local))
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table.note(f"overhead per remote attempt: bundle out {out_ms:.0f} ms (bundle the base, clone it on the node), "
               f"bundle back {back_ms:.0f} ms (bundle the change, check it, make it the task branch); medians")
    table.note(f"{count} tasks per row, submitted at once; one Ray head with 4 CPUs on this machine "
               f"({os.cpu_count()} real CPUs, shared), each attempt reserving one; unconfined")
    return table
