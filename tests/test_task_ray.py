"""Task attempts on a real Ray cluster (``tasks.backend = "ray"``): a head
with two worker CPUs and the daemons in a network namespace of their own
(``ray_cluster``), the scripted runtime editing real git repositories on the
node, the queue, the fence and the reviews still the daemon's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from console_http import CONSOLE_ON
from ray_cluster import ADDRESS, NamespacedDaemons, RayCluster, cluster_or_skip
from task_repos import git, make_repo
from test_task_workers import add, branch, kinds, reviews, show, task_rules, wait_ended

from conftest import Daemon, enact_env, wait_for


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    started = cluster_or_skip(cpus=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def ray_daemons(cluster: RayCluster) -> Iterator[NamespacedDaemons]:
    factory = NamespacedDaemons(cluster)
    try:
        yield factory
    finally:
        factory.close()


def start(daemons: NamespacedDaemons, rules: str, *args: str, home: Path | None = None,
          env: dict[str, str] | None = None) -> Daemon:
    home = home or daemons.new_home()
    rules_file = home.parent / "rules.toml"  # a path the node reads as it is: its own home is a scratch one
    if not rules_file.exists():
        rules_file.write_text(rules)
    return daemons.start(home, *args, env={
        "ENACT_TASKS_BACKEND": "ray", "ENACT_TASKS_RAY_ADDRESS": ADDRESS, "ENACT_TASKS_RAY_WORKERS": "2",
        "ENACT_TASKS_CONFINEMENT": "auto", "ENACT_SCRIPTED_RULES": str(rules_file), **(env or {})})


def node_of(shown: dict[str, Any]) -> str:
    [on_node] = [event["summary"] for event in shown["events"] if "on the Ray node" in event["summary"]][-1:]
    return on_node


def attempt_pid(daemon: Daemon, task_id: int) -> int | None:
    """The Ray worker process the task's newest attempt runs in, once a node has it."""
    summaries = [event["summary"] for event in show(daemon, task_id)["events"] if "on the Ray node" in event["summary"]]
    found = re.search(r"worker pid (\d+)", summaries[-1]) if summaries else None
    return int(found.group(1)) if found else None


def console_page(cluster: RayCluster, daemon: Daemon, path: str) -> str:
    """A console page as a signed-in browser gets it; from inside the
    namespace, where the console listens."""
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from console_http import fetch, "
              f"signed_in; from conftest import Daemon; address, cookie = signed_in(Daemon(*sys.argv[1:2], None, "
              f"None)); answer = fetch(address, {path!r}, headers={{'Cookie': cookie}}); print(answer.status); "
              "print(answer.body)")
    done = subprocess.run([*cluster.enter, sys.executable, "-c", script, str(daemon.home)],
                          env=enact_env(daemon.home), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("200\n"), done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


CHECKED = 'match = "mark the answer"\nrun = ["sh", "-c", "echo \'# checked\' >> lib.py"]\nreply = "done"'


def test_a_task_runs_on_a_ray_node_and_lands_through_its_review(ray_daemons: NamespacedDaemons,
                                                                tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = start(ray_daemons, task_rules(CHECKED))
    task_id = add(daemon, repo, "mark the answer as checked")
    shown = wait_ended(daemon, task_id, timeout=120)
    assert shown["state"] == "succeeded", (shown["summary"], daemon.log_text()[-3000:])
    assert "127.0.0.1" in node_of(shown)
    assert {"validated", "captured", "review-opened", "succeeded"} <= set(kinds(shown))
    [review] = reviews(daemon)
    assert review["task_id"] == task_id and str(review["id"]) == str(shown["review"])
    assert "# checked" in git(repo, "show", f"{branch(daemon, task_id)}:lib.py")
    assert "passed" in daemon.cli("task", "log", str(task_id)).stdout  # the node's log, streamed to the daemon
    assert not (daemon.home / "worktrees" / f"task-{task_id}").exists()  # the worktree was the node's
    landed = daemon.cli("review", "land", str(review["id"]), "--json")
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert "# checked" in (repo / "lib.py").read_text()


def test_a_change_to_tests_on_a_node_fails_the_attempt_with_that_reason(ray_daemons: NamespacedDaemons,
                                                                        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    rule = 'match = "weaken"\nrun = ["sh", "-c", "echo \'# weakened\' >> tests/test_lib.py"]\nreply = "done"'
    daemon = start(ray_daemons, task_rules(rule))
    task_id = add(daemon, repo, "weaken the test")
    shown = wait_ended(daemon, task_id, timeout=120)
    assert shown["state"] == "failed", shown["summary"]
    assert "protected paths" in shown["summary"] and "tests/test_lib.py" in shown["summary"]
    assert reviews(daemon) == []
    assert branch(daemon, task_id) not in git(repo, "branch", "--list")


def gated_rules(tmp_path: Path) -> tuple[str, Path, Path]:
    """Rules whose edit waits for a gate file (so an attempt is mid-way
    while the test acts), and the gate and a file each start touches
    (outside the worktree: their daemons run unconfined, ``GATED``)."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    script = f"echo x >> {started}; while [ ! -e {gate} ]; do sleep 0.05; done; echo '# checked' >> lib.py"
    return task_rules(f'match = "mark"\nrun = ["sh", "-c", "{script}"]\nreply = "done"'), gate, started


GATED = {"ENACT_TASKS_LEASE_TTL_S": "3", "ENACT_TASKS_CONFINEMENT": "off"}


def test_a_remote_worker_killed_mid_task_loses_its_lease_and_the_task_runs_again_with_one_review(
        ray_daemons: NamespacedDaemons, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    rules, gate, started = gated_rules(tmp_path)
    daemon = start(ray_daemons, rules, env={**GATED, **CONSOLE_ON})
    task_id = add(daemon, repo, "mark the answer")
    wait_for(started.exists, timeout=120, what="the first attempt to be under way on a node")
    pid = attempt_pid(daemon, task_id)
    assert pid is not None
    [busy] = [worker for worker in daemon.cli_json("status", "--json")["workers"] if worker["task"] == task_id]
    assert f"(127.0.0.1), worker pid {pid}" in busy["node"]
    assert "on the Ray node" in daemon.cli("status").stdout
    overview = console_page(ray_daemons.cluster, daemon, "/")
    assert 'id="remote-workers"' in overview and f"worker pid {pid}" in overview
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "lease-expired" in kinds(show(daemon, task_id)), timeout=60, what="the lease to expire")
    gate.touch()
    shown = wait_ended(daemon, task_id, timeout=120)
    assert shown["state"] == "succeeded", shown["summary"]
    assert shown["attempt"] == 2
    assert [review["task_id"] for review in reviews(daemon)] == [task_id]
    assert attempt_pid(daemon, task_id) != pid


def test_a_daemon_taken_over_lets_none_of_its_remote_attempts_finish(ray_daemons: NamespacedDaemons,
                                                                     tmp_path: Path) -> None:
    repos = [make_repo(tmp_path / f"repo-{index}") for index in range(2)]
    rules, gate, started = gated_rules(tmp_path)
    old = start(ray_daemons, rules, env=GATED)
    ids = [add(old, repo, "mark the answer") for repo in repos]
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 2, timeout=120,
             what="both attempts to be under way on the cluster")
    new = start(ray_daemons, rules, "--takeover", home=old.home, env=GATED)
    assert old.wait_exit(30) == 0, old.log_text()[-3000:]
    gate.touch()
    for task_id in ids:
        shown = wait_ended(new, task_id, timeout=120)
        assert shown["state"] == "succeeded", shown["summary"]
        finishers = [event["worker"] for event in shown["events"]
                     if event["kind"] in ("review-opened", "succeeded", "failed", "captured")]
        assert finishers and all(worker.endswith("@g2") for worker in finishers), shown["events"]
        assert "lease-expired" in kinds(shown)
    assert sorted(review["task_id"] for review in reviews(new)) == sorted(ids)


def test_runtime_check_with_worker_checks_the_runtime_on_each_node(cluster: RayCluster, tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "scripted.toml").write_text(task_rules(CHECKED))
    env = enact_env(home, {"ENACT_TASKS_BACKEND": "ray", "ENACT_TASKS_RAY_ADDRESS": ADDRESS})
    checked = subprocess.run([*cluster.enter, sys.executable, "-m", "enact", "runtime", "check", "--worker", "--json"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = orjson.loads(checked.stdout)
    assert report["ok"] and report["adapter"] == "scripted"
    [node] = report["nodes"]
    assert "127.0.0.1" in node["node"] and node["problems"] == []
    local = subprocess.run([sys.executable, "-m", "enact", "runtime", "check", "--worker", "--json"],
                           env=enact_env(home), capture_output=True, text=True, timeout=60)
    assert local.returncode == 2 and "tasks.backend is local" in orjson.loads(local.stdout)["error"]
