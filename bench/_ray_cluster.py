"""A real Ray cluster on loopback only, for the tests and the benchmarks:
``ray start --head`` in a network and mount namespace of its own, whose
network holds only ``lo`` (``tests/ray_cluster.py`` starts daemons in it).

Started on the machine's own network, a Ray head listens on every
interface, names its node by the machine's outside address and probes a
public one to find it. In a namespace with nothing but ``lo`` it has only
127.0.0.1, so the traffic stays on loopback, and its ports are the
namespace's own (the default GCS port clashes with no one).

A driver finds the cluster with ``address="auto"``, as on an owner's
machine: Ray reads the address the last ``ray start`` wrote to
``ray_current_cluster`` in its temporary directory (``/tmp/ray``), which is
the machine's, shared by every cluster started on it (``--temp-dir`` does
not move that file). So the namespace has a private tmpfs over that
directory: its ``ray start`` writes there, and its drivers read only what
it wrote. (Ray also looks for running raylets' GCS addresses, which every
namespace's cluster names 127.0.0.1:6379: in this namespace, its own.)

Needs root (``unshare -n -m``, ``mount``), which CI has. Every process that
talks to the cluster enters both namespaces with ``nsenter -n -m``
(``RayCluster.enter``); the CLI talks to a daemon over its Unix socket,
which a network namespace does not separate, so it runs outside.

The cluster is ended by the pids of every process in the namespace, never
by ``ray stop --force``, which ends every Ray process on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

NEEDS = "a Ray cluster on loopback only needs root, unshare, nsenter, mount and ip"


class ClusterUnavailable(RuntimeError):
    pass


def possible() -> bool:
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("unshare", "nsenter", "mount", "ip"))


ADDRESS = "auto"
"""How a driver in the namespace names the cluster: Ray finds it (see above)."""
GCS = "127.0.0.1:6379"
"""The head's GCS, the namespace's own port: where another node joins."""


def ray_temp_dir() -> Path:
    """Where Ray 2.60 keeps ``ray_current_cluster`` and its sessions unless
    told otherwise (``ray._common.utils.get_default_ray_temp_dir``), for the
    environment every entered process inherits."""
    return Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp") / "ray"


def _namespace(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


class RayCluster:
    """``ray start --head`` with ``cpus`` worker CPUs, in fresh network and mount namespaces."""

    def __init__(self, cpus: int = 2) -> None:
        if not possible():
            raise ClusterUnavailable(NEEDS)
        self.holder = subprocess.Popen(["unshare", "-n", "-m", "--propagation", "private", "sleep", "infinity"],
                                       stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while any(_namespace(self.holder.pid, kind) in (None, _namespace(os.getpid(), kind))
                  for kind in ("net", "mnt")):
            if time.monotonic() > deadline:
                self.holder.kill()
                raise ClusterUnavailable("the namespaces were not made within 10 s")
            time.sleep(0.01)
        self.namespace = _namespace(self.holder.pid, "net")
        self.ray = str(Path(sys.executable).parent / "ray")
        # token authentication on, as an owner's cluster should run: a token
        # of this cluster's own, which every process entered with it carries
        self.token = secrets.token_hex(32)
        try:
            temp = ray_temp_dir()
            temp.mkdir(parents=True, exist_ok=True)  # the mount point; the machine's Ray would make it too
            subprocess.run([*self.enter, "mount", "-t", "tmpfs", "-o", "mode=0700", "enact-ray", str(temp)],
                           check=True, capture_output=True)
            subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True, capture_output=True)
            self._ray_start("--head", "--num-cpus", str(cpus), "--include-dashboard=false")
        except BaseException:
            self.stop()
            raise

    def _ray_start(self, *args: str, env: Mapping[str, str] | None = None) -> None:
        # No log monitor: it streams the workers' logs to drivers, and a
        # daemon takes none (``log_to_driver=False``); it would poll all along.
        subprocess.run([*self.enter, self.ray, "start", *args, "--disable-usage-stats", "--include-log-monitor=false",
                        "--node-ip-address", "127.0.0.1"], check=True, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})})  # the token: ``enter``

    def add_node(self, *, cpus: int, resources: Mapping[str, float], env: Mapping[str, str] | None = None) -> None:
        """Another node joins the cluster, on this machine, in the namespace,
        with ``resources`` (which pin attempts to it) and ``env`` for its
        processes (Ray's worker processes inherit its raylet's)."""
        self._ray_start("--address", GCS, "--num-cpus", str(cpus), "--resources", json.dumps(dict(resources)),
                        env=env)

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a program in the namespaces, with the
        cluster's token (``RAY_AUTH_MODE=token``: a driver without it is refused)."""
        return self.enter_with_token(self.token)

    def enter_with_token(self, token: str) -> list[str]:
        """``enter``, but the program carries ``token`` as its Ray token."""
        return ["nsenter", "-n", "-m", "-t", str(self.holder.pid),
                "env", "RAY_AUTH_MODE=token", f"RAY_AUTH_TOKEN={token}"]

    def processes(self) -> list[int]:
        """Every process in the namespace but its holder."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.holder.pid and _namespace(int(entry), "net") == self.namespace:
                found.append(int(entry))
        return found

    def stop(self) -> None:
        """Every process in the namespace ends; with the last, the private
        tmpfs (Ray's sessions and logs) goes too."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.holder.kill()
        self.holder.wait(timeout=10)
