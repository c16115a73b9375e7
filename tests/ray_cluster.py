"""A real Ray cluster for the tests, in a network namespace of its own that
holds only loopback, and daemons that run inside it.

Started on the machine's own network, a Ray head listens on every
interface, names its node by the machine's outside address and probes a
public one to find it. In a namespace with nothing but ``lo`` it has only
127.0.0.1, so the test's traffic stays on loopback, and its ports are the
namespace's own (the default GCS port clashes with no one). Needs root
(``unshare -n``), which CI has. Every process of the test enters the
namespace with ``nsenter -n``; the CLI talks to a daemon over its Unix
socket, which a network namespace does not separate, so it runs outside.

The cluster is ended by the pids of every process in the namespace, never
by ``ray stop --force``, which ends every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import Daemon, DaemonFactory, enact_env, wait_for

ADDRESS = "127.0.0.1:6379"
"""The head's GCS, the namespace's own port."""


def _net_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


class RayCluster:
    """``ray start --head`` with ``cpus`` worker CPUs, in a fresh network namespace."""

    def __init__(self, cpus: int = 2) -> None:
        if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
            reason = "a Ray cluster on loopback only needs root, unshare and nsenter"
            if os.environ.get("CI") == "true":
                pytest.fail(f"{reason}, and CI=true requires it", pytrace=False)
            pytest.skip(reason)
        self._scratch = tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp")  # Ray's socket paths are short
        self.holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"], stdin=subprocess.DEVNULL)
        wait_for(lambda: _net_namespace(self.holder.pid) not in (None, _net_namespace(os.getpid())),
                 what="the network namespace")
        self.namespace = _net_namespace(self.holder.pid)
        self.ray = str(Path(sys.executable).parent / "ray")
        try:
            subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True, capture_output=True)
            subprocess.run(
                [*self.enter, self.ray, "start", "--head", "--num-cpus", str(cpus), "--disable-usage-stats",
                 "--include-dashboard=false", "--temp-dir", self._scratch.name, "--node-ip-address", "127.0.0.1"],
                check=True, capture_output=True, text=True, timeout=120,
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        except BaseException:
            self.stop()
            raise

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a program in the namespace."""
        return ["nsenter", "-n", "-t", str(self.holder.pid)]

    def processes(self) -> list[int]:
        """Every process in the namespace but its holder."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.holder.pid and _net_namespace(int(entry)) == self.namespace:
                found.append(int(entry))
        return found

    def stop(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.holder.kill()
        self.holder.wait(timeout=10)
        self._scratch.cleanup()


class NamespacedDaemons(DaemonFactory):
    """Daemons started in the cluster's namespace (as ``DaemonFactory.start`` starts them)."""

    def __init__(self, cluster: RayCluster) -> None:
        super().__init__()
        self.cluster = cluster

    def start(self, home: Path | None = None, *args: str, env: dict[str, str] | None = None,
              wait: bool = True, cwd: Path | None = None) -> Daemon:
        home = home or self.new_home()
        log = home.parent / f"daemon-{len(self.started)}.log"
        env = {"ENACT_DAEMON_COMMAND_SERVER": "false", "ENACT_CONSOLE_ENABLED": "false", **(env or {})}
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                [*self.cluster.enter, sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr",
                 "127.0.0.1:0", *args],
                env=enact_env(home, env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT)
        daemon = Daemon(home, process, log)  # nsenter enters and execs: its pid is the daemon's
        self.started.append(daemon)
        if wait:
            daemon.wait_ready(timeout=60)
        return daemon
