"""A real Ray cluster on loopback only, for the tests and the benchmarks:
``ray start --head`` in a network namespace of its own that holds only
``lo`` (``tests/ray_cluster.py`` starts daemons in it).

Started on the machine's own network, a Ray head listens on every
interface, names its node by the machine's outside address and probes a
public one to find it. In a namespace with nothing but ``lo`` it has only
127.0.0.1, so the traffic stays on loopback, and its ports are the
namespace's own (the default GCS port clashes with no one). Needs root
(``unshare -n``), which CI has. Every process that talks to the cluster
enters the namespace with ``nsenter -n`` (``RayCluster.enter``); the CLI
talks to a daemon over its Unix socket, which a network namespace does not
separate, so it runs outside.

The cluster is ended by the pids of every process in the namespace, never
by ``ray stop --force``, which ends every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEEDS = "a Ray cluster on loopback only needs root, unshare, nsenter and ip"


class ClusterUnavailable(RuntimeError):
    pass


def possible() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("unshare", "nsenter", "ip"))


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
        if not possible():
            raise ClusterUnavailable(NEEDS)
        self._scratch = tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp")  # Ray's socket paths are short
        self.holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while _net_namespace(self.holder.pid) in (None, _net_namespace(os.getpid())):
            if time.monotonic() > deadline:
                self.holder.kill()
                raise ClusterUnavailable("the network namespace was not made within 10 s")
            time.sleep(0.01)
        self.namespace = _net_namespace(self.holder.pid)
        self.ray = str(Path(sys.executable).parent / "ray")
        # token authentication on, as an owner's cluster should run: a token
        # of this cluster's own, which every process entered with it carries
        self.token = secrets.token_hex(32)
        try:
            subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True, capture_output=True)
            subprocess.run(
                [*self.enter, self.ray, "start", "--head", "--num-cpus", str(cpus), "--disable-usage-stats",
                 "--include-dashboard=false", "--temp-dir", self._scratch.name, "--node-ip-address", "127.0.0.1"],
                check=True, capture_output=True, text=True, timeout=120,
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})  # the token comes with ``enter``
        except BaseException:
            self.stop()
            raise

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a program in the namespace, with the
        cluster's token (``RAY_AUTH_MODE=token``: a driver without it is refused)."""
        return ["nsenter", "-n", "-t", str(self.holder.pid),
                "env", "RAY_AUTH_MODE=token", f"RAY_AUTH_TOKEN={self.token}"]

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
