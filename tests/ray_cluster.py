"""Daemons in the network namespace of a real Ray cluster on loopback only
(``bench/_ray_cluster.py`` says why the namespace, and how it is ended)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench._ray_cluster import ADDRESS, NEEDS, RayCluster, possible
from enact.tasks.remote_attempt import node_root

from conftest import Daemon, DaemonFactory, enact_env

__all__ = ["ADDRESS", "NamespacedDaemons", "RayCluster", "cluster_or_skip"]


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

