"""Task attempts on a real Ray cluster (``tasks.backend = "ray"``): a head
with two worker CPUs and the daemons in network and mount namespaces of
their own (``ray_cluster``), found with ``tasks.ray.address = "auto"``, the
scripted runtime editing real git repositories on the node, the queue, the
fence and the reviews still the daemon's."""

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
from ray_cluster import ADDRESS, ClusterLook, NamespacedDaemons, RayCluster, cluster_or_skip
from task_repos import git, make_repo
from test_task_workers import _alive, add, branch, kinds, reviews, show, task_rules

from enact.daemon import EXIT_REFUSED
from enact.messages.tasks import EventPage, Events, Found, Get
from enact.tasks.records import EventKind, TaskState

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
          env: dict[str, str] | None = None, wait: bool = True, enter: list[str] | None = None) -> Daemon:
    home = home or daemons.new_home()
    rules_file = home.parent / "rules.toml"  # a path the node reads as it is: its own home is a scratch one
    if not rules_file.exists():
        rules_file.write_text(rules)
    return daemons.start(home, *args, wait=wait, enter=enter, env={
        "ENACT_TASKS_BACKEND": "ray", "ENACT_TASKS_RAY_ADDRESS": ADDRESS, "ENACT_TASKS_RAY_WORKERS": "2",
        "ENACT_TASKS_CONFINEMENT": "auto", "ENACT_SCRIPTED_RULES": str(rules_file), **(env or {})})


ENDED = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.PAUSED)


def wait_ended(daemon: Daemon, task_id: int, timeout: float = 120) -> dict[str, Any]:
    """Wait for the task to end, looking over the control socket from this
    process (a CLI process every 50 ms would keep a core busy while the
    cluster works), then show it as the CLI does."""
    def ended() -> bool:
        found = daemon.request(Get(task_id=task_id))
        return isinstance(found, Found) and found.task.state in ENDED

    wait_for(ended, timeout=timeout, what=f"task {task_id} to end")
    return show(daemon, task_id)


def has_event(daemon: Daemon, task_id: int, kind: EventKind) -> bool:
    page = daemon.request(Events(task_id=task_id))
    return isinstance(page, EventPage) and any(item.event.kind is kind for item in page.events)


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
WEAKEN = 'match = "weaken"\nrun = ["sh", "-c", "echo \'# weakened\' >> tests/test_lib.py"]\nreply = "done"'


ONE_AT_A_TIME = {"ENACT_TASKS_RAY_WORKERS": "1"}
"""For a daemon whose tests run one task at a time: each worker slot's
attempts start a Ray worker process of their own."""


@pytest.fixture(scope="module")
def shared(cluster: RayCluster) -> Iterator[Daemon]:
    """One daemon for the tests whose tasks each end on their own (each
    looks only at its own task, review and repository)."""
    factory = NamespacedDaemons(cluster)
    try:
        yield start(factory, task_rules(CHECKED, WEAKEN), env=ONE_AT_A_TIME)
    finally:
        factory.close()


def own_reviews(daemon: Daemon, task_id: int) -> list[dict[str, Any]]:
    return [review for review in reviews(daemon) if review["task_id"] == task_id]


def repository_state(repo: Path) -> tuple[str, str, str]:
    """What the owner sees of a repository: its refs, its checkout's status and its files."""
    files = "".join(f"{path}:{(repo / path).read_text()}" for path in ("lib.py", "tests/test_lib.py"))
    return git(repo, "for-each-ref"), git(repo, "status", "--porcelain"), files


def test_a_task_runs_on_a_ray_node_and_lands_through_its_review(shared: Daemon, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = shared
    task_id = add(daemon, repo, "mark the answer as checked")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "succeeded", (shown["summary"], daemon.log_text()[-3000:])
    assert "127.0.0.1" in node_of(shown)
    assert {"validated", "captured", "review-opened", "succeeded"} <= set(kinds(shown))
    [review] = own_reviews(daemon, task_id)
    assert str(review["id"]) == str(shown["review"])
    assert "# checked" in git(repo, "show", f"{branch(daemon, task_id)}:lib.py")
    assert "passed" in daemon.cli("task", "log", str(task_id)).stdout  # the node's log, streamed to the daemon
    assert not (daemon.home / "worktrees" / f"task-{task_id}").exists()  # the worktree was the node's
    landed = daemon.cli("review", "land", str(review["id"]), "--json")
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert "# checked" in (repo / "lib.py").read_text()


def test_a_change_to_tests_on_a_node_fails_the_attempt_with_that_reason(shared: Daemon, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    daemon = shared
    task_id = add(daemon, repo, "weaken the test")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "failed", shown["summary"]
    assert "protected paths" in shown["summary"] and "tests/test_lib.py" in shown["summary"]
    assert own_reviews(daemon, task_id) == []
    assert branch(daemon, task_id) not in git(repo, "branch", "--list")


COMPROMISED = "compromised-node"
"""The custom resource only the compromised node has."""
SKIPS_THE_NODES_CHECK = '''"""A compromised Ray node's Python (tests/test_task_ray.py): the worktree's
protected-path check lets every change through, so a change to tests/ is
captured, bundled and sent to the daemon."""
from enact.tasks.protected import Guards, ProtectedVerdict

Guards.check = lambda self, root, changed: ProtectedVerdict()
'''


@pytest.fixture(scope="module")
def compromised_node(cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A node that joins the cluster with a ``sitecustomize`` on its
    PYTHONPATH (its worker processes inherit its raylet's environment) that
    turns the node's own protected-path check off; no CPU, so only an
    attempt that asks for its resource (the name returned) goes there."""
    python_path = tmp_path_factory.mktemp("compromised-python")
    (python_path / "sitecustomize.py").write_text(SKIPS_THE_NODES_CHECK)
    cluster.add_node(cpus=0, resources={COMPROMISED: 1}, env={"PYTHONPATH": str(python_path)})
    return COMPROMISED


def test_a_bundle_from_a_compromised_node_that_touches_tests_is_refused_by_the_daemon(
        ray_daemons: NamespacedDaemons, compromised_node: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = repository_state(repo)
    daemon = start(ray_daemons, task_rules(WEAKEN), env={
        **ONE_AT_A_TIME, "ENACT_TASKS_RAY_RESOURCES": f"{compromised_node}=1", "ENACT_TASKS_RAY_NUM_CPUS": "0"})
    task_id = add(daemon, repo, "weaken the test")
    shown = wait_ended(daemon, task_id)
    assert shown["state"] == "failed", shown["summary"]
    assert {"validated", "captured"} <= set(kinds(shown))  # the node's own check let the change through
    assert ("the review was refused: the change touches protected paths without the owner's leave"
            in shown["summary"] and "tests/test_lib.py" in shown["summary"]), shown["summary"]
    assert "the change bundle from the node is refused" in daemon.log_text()  # the daemon's own word, not the node's
    assert "review-opened" not in kinds(shown) and own_reviews(daemon, task_id) == []
    assert repository_state(repo) == before  # no ref, no file: the refused change's objects are unreachable
    assert branch(daemon, task_id) not in git(repo, "branch", "--list")


def gated_rules(tmp_path: Path) -> tuple[str, Path, Path]:
    """Rules whose edit waits for a gate file (so an attempt is mid-way
    while the test acts), and the gate and a file each start touches
    (outside the worktree: their daemons run unconfined, ``GATED``);
    each start writes its shell's pid there."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    script = f"echo $$ >> {started}; while [ ! -e {gate} ]; do sleep 0.05; done; echo '# checked' >> lib.py"
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
    wait_for(lambda: has_event(daemon, task_id, EventKind.LEASE_EXPIRED), timeout=60, what="the lease to expire")
    gate.touch()
    shown = wait_ended(daemon, task_id)
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
        shown = wait_ended(new, task_id)
        assert shown["state"] == "succeeded", shown["summary"]
        finishers = [event["worker"] for event in shown["events"]
                     if event["kind"] in ("review-opened", "succeeded", "failed", "captured")]
        assert finishers and all(worker.endswith("@g2") for worker in finishers), shown["events"]
        assert "lease-expired" in kinds(shown)
    assert sorted(review["task_id"] for review in reviews(new)) == sorted(ids)


def test_a_graceful_stop_hands_remote_attempts_back_and_each_runs_again_with_one_review(
        ray_daemons: NamespacedDaemons, tmp_path: Path) -> None:
    repos = [make_repo(tmp_path / f"repo-{index}") for index in range(2)]
    rules, gate, started = gated_rules(tmp_path)
    unconfined = {"ENACT_TASKS_CONFINEMENT": "off"}  # the lease as by default: a hand-back is no expiry
    daemon = start(ray_daemons, rules, env=unconfined)
    ids = [add(daemon, repo, "mark the answer") for repo in repos]
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 2, timeout=120,
             what="both attempts to be under way on the cluster")
    stopped = daemon.cli("daemon", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert daemon.wait_exit(30) == 0, daemon.log_text()[-3000:]
    for pid in map(int, started.read_text().split()):  # the nodes' runtime commands were cancelled
        wait_for(lambda pid=pid: not _alive(pid), timeout=10, what=f"the node's command {pid} to end")
    gate.touch()
    restarted = start(ray_daemons, rules, home=daemon.home, env=unconfined)
    for task_id in ids:
        shown = wait_ended(restarted, task_id)
        assert shown["state"] == "succeeded", shown["summary"]
        assert "interrupted" in kinds(shown) and "lease-expired" not in kinds(shown), kinds(shown)
        assert (shown["attempt"], shown["uncounted_attempts"]) == (2, 1)
        assert [review["task_id"] for review in own_reviews(restarted, task_id)] == [task_id]
    assert sorted(review["task_id"] for review in reviews(restarted)) == sorted(ids)


def test_a_daemons_attempts_share_one_mailbox_actor_each_under_its_own_key_and_a_lost_one_is_made_again(
        ray_daemons: NamespacedDaemons, tmp_path: Path) -> None:
    repos = [make_repo(tmp_path / f"repo-{index}") for index in range(3)]
    rules, gate, started = gated_rules(tmp_path)
    daemon = start(ray_daemons, rules, env={"ENACT_TASKS_CONFINEMENT": "off"})  # two worker slots
    ids = [add(daemon, repo, "mark the answer") for repo in repos[:2]]
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 2, timeout=120,
             what="both attempts to be under way on the cluster")
    with ClusterLook(ray_daemons.cluster) as look:
        [mailbox] = look.mailboxes_of(daemon)  # one actor (one process) for both slots
        assert len(look.held(mailbox)) == 2  # each attempt under a key of its own
        gate.touch()
        for task_id, repo in zip(ids, repos, strict=False):
            shown = wait_ended(daemon, task_id)
            assert shown["state"] == "succeeded", (shown["summary"], daemon.log_text()[-3000:])
            assert [review["task_id"] for review in own_reviews(daemon, task_id)] == [task_id]
            assert "# checked" in git(repo, "show", f"{branch(daemon, task_id)}:lib.py")
        # The ended attempts leave nothing in it (each key closes once its Ray task is over, just after
        # the Finish), and it is kept for the next attempts.
        wait_for(lambda: look.held(mailbox) == {}, timeout=30, what="the ended attempts' keys to close")
        assert look.mailboxes_of(daemon) == [mailbox]
        look.kill(mailbox)  # as the cluster loses it (its node died)
        wait_for(lambda: look.mailboxes_of(daemon) == [], timeout=30, what="the mailbox actor to end")
        third = add(daemon, repos[2], "mark the answer")
        shown = wait_ended(daemon, third)
        assert shown["state"] == "succeeded", (shown["summary"], daemon.log_text()[-3000:])
        assert shown["attempt"] == 1  # the lost mailbox cost no attempt: the next one made another
        [again] = look.mailboxes_of(daemon)
        assert again != mailbox
        wait_for(lambda: look.held(again) == {}, timeout=30, what="the third attempt's key to close")
        stopped = daemon.cli("daemon", "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert daemon.wait_exit(30) == 0, daemon.log_text()[-3000:]
        assert f"the mailbox actor {again} ends with the daemon" in daemon.log_text()
        assert look.mailboxes_of(daemon) == []


def test_a_daemon_with_a_wrong_token_is_refused_at_start_in_one_line(ray_daemons: NamespacedDaemons,
                                                                    cluster: RayCluster) -> None:
    home = ray_daemons.new_home()
    refused = start(ray_daemons, task_rules(CHECKED), home=home, wait=False,
                    enter=cluster.enter_with_token("0" * 64),
                    env={"RAY_gcs_server_port_wait_time_s": "1"})  # Ray's connect window: 1 s, not 20
    assert refused.wait_exit(60) == EXIT_REFUSED
    assert refused.log_text().splitlines() == [
        "enact: the Ray cluster (auto) cannot be reached: it refused this daemon's token (the cluster runs with "
        "RAY_AUTH_MODE=token: give the daemon the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"]
    assert list(home.iterdir()) == []  # refused before the home is touched


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
