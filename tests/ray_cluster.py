"""Daemons in the network namespace of a real Ray cluster on loopback only
(``bench/_ray_cluster.py`` says why the namespace, and how it is ended)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from bench._ray_cluster import ADDRESS, NEEDS, RayCluster, possible
from enact.tasks.remote_attempt import node_root

from conftest import Daemon, DaemonFactory, enact_env

__all__ = ["ADDRESS", "ClusterLook", "NamespacedDaemons", "RayCluster", "cluster_or_skip"]


def cluster_or_skip(cpus: int = 2) -> RayCluster:
    """A started cluster; without root (and the tools) the test is skipped, or fails under CI=true."""
    if not possible():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{NEEDS}, and CI=true requires it", pytrace=False)
        pytest.skip(NEEDS)
    return RayCluster(cpus=cpus)


class NamespacedDaemons(DaemonFactory):
    """Daemons started in the cluster's namespace (as ``DaemonFactory.start`` starts them)."""

    def __init__(self, cluster: RayCluster) -> None:
        super().__init__()
        self.cluster = cluster

    def start(self, home: Path | None = None, *args: str, env: dict[str, str] | None = None,
              wait: bool = True, cwd: Path | None = None, enter: list[str] | None = None) -> Daemon:
        """``enter``: the prefix that enters the namespace, the cluster's own by default."""
        home = home or self.new_home()
        log = home.parent / f"daemon-{len(self.started)}.log"
        env = {"ENACT_DAEMON_COMMAND_SERVER": "false", "ENACT_CONSOLE_ENABLED": "false", **(env or {})}
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                [*(enter or self.cluster.enter), sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr",
                 "127.0.0.1:0", *args],
                env=enact_env(home, env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT)
        daemon = Daemon(home, process, log)  # nsenter enters and execs: its pid is the daemon's
        self.started.append(daemon)
        if wait:
            daemon.wait_ready(timeout=60)
        return daemon

    def close(self) -> None:
        super().close()
        for daemon in self.started:  # what the nodes kept for the homes (their doctor baselines)
            shutil.rmtree(node_root(daemon.home), ignore_errors=True)



_LOOK = """
import json, sys
import ray
ray.init(address="auto", namespace="enact", log_to_driver=False, configure_logging=False)
for line in sys.stdin:
    verb, _, name = line.strip().partition(" ")
    if verb == "names":
        found = sorted(actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
                       if actor["namespace"] == "enact")
    elif verb == "held":
        found = ray.get(ray.get_actor(name).held.remote())
    else:
        ray.kill(ray.get_actor(name))
        found = None
    print(json.dumps(found), flush=True)
"""


class ClusterLook:
    """A driver of the test's own in the cluster's namespace, connected once
    (a connect costs seconds), that looks at the daemons' mailbox actors:
    their names, what one holds, and kills one as a lost node would."""

    def __init__(self, cluster: RayCluster) -> None:
        self._driver = subprocess.Popen([*cluster.enter, sys.executable, "-c", _LOOK], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def _said(self, line: str) -> Any:
        assert self._driver.stdin is not None and self._driver.stdout is not None
        self._driver.stdin.write(line + "\n")
        self._driver.stdin.flush()
        answer = self._driver.stdout.readline()
        assert answer, f"the looking driver ended (exit {self._driver.poll()})"
        return json.loads(answer)

    def mailboxes_of(self, daemon: Daemon) -> list[str]:
        """The names of the daemon's live mailbox actors (``enact-mailbox-<host>-<pid>-...``)."""
        return [name for name in self._said("names") if name.startswith("enact-mailbox-")
                and f"-{daemon.pid}-" in name]

    def held(self, name: str) -> dict[str, list[int]]:
        """Each attempt key open in the mailbox, with its messages not taken and answers not fetched."""
        found: dict[str, list[int]] = self._said(f"held {name}")
        return found

    def kill(self, name: str) -> None:
        self._said(f"kill {name}")

    def __enter__(self) -> ClusterLook:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._driver.stdin is not None:
            self._driver.stdin.close()
        try:
            self._driver.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._driver.kill()
            self._driver.wait()
