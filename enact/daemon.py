"""The daemon's plumbing: claim the home, start the actors, serve, stop.

Kept apart from the actors so that each actor stays a plain message handler
and this module is the only place that knows the start-up order.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from enact import __version__, config
from enact.actors.control import ControlServer
from enact.actors.epoch import AlreadyRunning, EpochFenceActor, Fence
from enact.actors.metrics import Metrics, MetricsServer, serve
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.home import STATE_DIR
from enact.messages.control import Shutdown, ShuttingDown, Status, StatusReport, StorageStatus
from enact.storage import SchemaError, Storage, StorageError

log = logging.getLogger("enact.daemon")

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_REFUSED = 2


def actor_specs() -> list[ActorSpec]:
    """Every actor of the daemon and what it owns; later issues add theirs."""
    return [
        ActorSpec(name="epoch", actor=EpochFenceActor),
    ]


@dataclass(slots=True)
class _StopRequest:
    event: threading.Event
    exit_code: int = EXIT_OK
    reason: str = ""

    def set(self, reason: str, exit_code: int = EXIT_OK) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.exit_code = exit_code
            self.event.set()


def run(home: Path, *, overrides: Mapping[str, Any] | None = None, takeover: bool = False) -> int:
    """Run the daemon in the foreground until stopped; returns the exit code."""
    try:
        settings = config.load(home, overrides=overrides)
    except config.ConfigError as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    _configure_logging(settings["daemon.log_level"])
    try:
        storage = Storage(home / STATE_DIR, map_size=settings["storage.map_size_mb"] << 20)
    except (SchemaError, StorageError) as error:
        print(f"enact: {error}", file=sys.stderr)
        return EXIT_REFUSED
    fence = Fence(home, storage)
    try:
        owner = fence.acquire(takeover=takeover)
    except AlreadyRunning as error:
        print(str(error), file=sys.stderr)
        storage.close()
        return EXIT_REFUSED
    log.info("enact %s owns %s as generation %d (pid %d)", __version__, home, owner.generation, owner.pid)
    return _Daemon(home, settings, storage, fence).serve()


class _Daemon:
    def __init__(self, home: Path, settings: config.Config, storage: Storage, fence: Fence) -> None:
        self.home = home
        self.settings = settings
        self.storage = storage
        self.fence = fence
        self.started = time.monotonic()
        self.stop = _StopRequest(event=threading.Event())
        self.metrics = Metrics()
        self.metrics.generation.set(fence.generation)
        self.supervisor = Supervisor(
            actor_specs(),
            home=home,
            config=settings,
            metrics=self.metrics,
            storage=storage,
            fence=fence,
            on_fatal=lambda why: self.stop.set(why, EXIT_FATAL),
        )
        self.metrics.register_gauges(self._scrape_gauges)
        self.metrics_server: MetricsServer | None = None
        self.control = ControlServer(
            home,
            self.supervisor,
            self.metrics,
            idle_timeout_s=settings["control.idle_timeout_s"],
            request_timeout_s=settings["control.request_timeout_s"],
        )
        self.control.serve_locally(Status, lambda _: self.status())
        self.control.serve_locally(Shutdown, self._shutdown_requested)

    def serve(self) -> int:
        try:
            self.supervisor.start()
            self.metrics_server = serve(self.metrics, self.settings["daemon.metrics_addr"])
            self.control.start()
        except Exception as error:
            log.exception("start-up failed")
            print(f"enact: cannot start: {type(error).__name__}: {error}", file=sys.stderr)
            self._shut_down()
            return EXIT_FATAL
        self.fence.watch(lambda current: self.stop.set(f"taken over by generation {current}"))
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        log.info("ready: control socket %s, metrics on %s", self.control.path, self.metrics_server.address)
        _notify_systemd(b"READY=1")
        try:
            while not self.stop.event.wait(0.5):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("stopping: %s", self.stop.reason)
        _notify_systemd(b"STOPPING=1")
        self._shut_down()
        return self.stop.exit_code

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop.set(f"received {signal.Signals(signum).name}")

    def _shutdown_requested(self, _: Shutdown) -> ShuttingDown:
        self.stop.set("asked to stop (enact daemon stop)")
        return ShuttingDown(pid=os.getpid())

    def _shut_down(self) -> None:
        timeout = self.settings["daemon.shutdown_timeout_s"]
        deadline = time.monotonic() + timeout
        self.control.stop()
        self.control.drain(timeout)
        self.supervisor.stop(max(0.0, deadline - time.monotonic()))
        if self.metrics_server is not None:
            self.metrics_server.stop()
        self.fence.release()
        self.storage.close()
        log.info("stopped")

    # -- reports ----------------------------------------------------------

    def status(self) -> StatusReport:
        stats = self.storage.stats()
        return StatusReport(
            version=__version__,
            pid=os.getpid(),
            home=str(self.home),
            generation=self.fence.generation,
            uptime_s=round(time.monotonic() - self.started, 3),
            metrics_addr=self.metrics_server.address if self.metrics_server else "",
            actors=tuple(self.supervisor.statuses()),
            storage=StorageStatus(
                path=stats.path, map_bytes=stats.map_bytes, used_bytes=stats.used_bytes, databases=stats.databases
            ),
        )

    def _scrape_gauges(self) -> Iterable[Metric]:
        mailbox = GaugeMetricFamily("enact_actor_mailbox_depth", "Messages waiting per actor", labels=["actor"])
        for family, value in sorted(self.supervisor.mailbox_depths().items()):
            mailbox.add_metric([family], value)
        stats = self.storage.stats()
        yield mailbox
        yield GaugeMetricFamily("enact_storage_map_bytes", "LMDB map size", value=stats.map_bytes)
        yield GaugeMetricFamily("enact_storage_used_bytes", "LMDB pages in use", value=stats.used_bytes)


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _notify_systemd(state: bytes) -> None:
    """sd_notify without a dependency: one datagram to $NOTIFY_SOCKET."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state)
    except OSError as error:
        log.warning("could not notify systemd: %s", error)
