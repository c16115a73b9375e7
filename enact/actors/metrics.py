"""Prometheus metrics: one registry per daemon, served over HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from enact import __version__
from enact.config import parse_address

if TYPE_CHECKING:
    import threading


class Metrics:
    """Every metric enact exports. Actors receive this object; nothing is global,
    so two daemons (or two tests) in one process never share counters."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.messages = Counter(
            "enact_actor_messages", "Messages handled, by actor and message type", ["actor", "type"], registry=r
        )
        self.message_seconds = Histogram(
            "enact_actor_message_seconds",
            "Time spent handling one message",
            ["actor"],
            registry=r,
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
        )
        self.restarts = Counter("enact_actor_restarts", "Actor restarts by the supervisor", ["actor"], registry=r)
        self.generation = Gauge("enact_epoch_generation", "The epoch generation this daemon holds", registry=r)
        self.build_info = Gauge("enact_build_info", "The running enact version", ["version"], registry=r)
        self.build_info.labels(version=__version__).set(1)
        self.control_errors = Counter(
            "enact_control_errors", "Control-socket requests refused, by reason", ["reason"], registry=r
        )
        self.inbox_events = Counter(
            "enact_inbox_events", "Chat events by outcome", ["channel", "outcome"], registry=r
        )
        self.deliveries = Counter(
            "enact_inbox_deliveries", "Reply delivery attempts by outcome", ["channel", "outcome"], registry=r
        )
        self.actions = Counter(
            "enact_conversation_actions", "Model actions by outcome", ["outcome"], registry=r
        )
        self.runtime_calls = Counter(
            "enact_runtime_calls", "Runtime calls by adapter and outcome", ["adapter", "outcome"], registry=r
        )

    def register_gauges(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Add gauges computed at scrape time (mailbox depth, storage size)."""
        self.registry.register(_CallbackCollector(collect))


class _CallbackCollector(Collector):
    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


@dataclass(frozen=True, slots=True)
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(metrics: Metrics, address: str) -> MetricsServer:
    host, port = parse_address(address)
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    return MetricsServer(server=server, thread=thread)
