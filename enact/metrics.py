"""Prometheus metrics: one registry per daemon, served over HTTP."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar, cast
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from enact import __version__
from enact.addresses import parse_address
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.message_metrics import ActorMessages
from enact.messages.epoch import Owner

if TYPE_CHECKING:
    import threading

log = logging.getLogger(__name__)

# Every label value a counter below can take, declared once. ``increase()``
# sees an incident only on a series that already existed before it, so
# ``Metrics.initialise`` creates each combination at 0 when the daemon starts;
# an outcome counted somewhere but missing here would be invisible to the
# alerts for its first occurrence (tests/test_metrics.py checks the code
# against these lists). The actors' names are not listed here: the supervisor
# creates a series for each actor and keyed pool it runs (the components').
# A feature's metrics and their labels are its own (``FeatureMetrics``).

RUNTIME_CALL_OUTCOMES = ("ok", "resume_failed", "failed", "timeout", "cancelled", "session_unknown", "unavailable",
                         "auth", "rate-limited", "malformed-output", "over_budget")
RUNTIME_TOKEN_KINDS = ("input", "cached_input", "output", "reasoning")
RUNTIME_PURPOSES = ("conversation", "task", "scan", "curation", "brainstorm", "lineage", "skill", "probe")
"""As enact.runtime.PURPOSES (not imported: this module stays light)."""
CHANNEL_POLL_ERROR_REASONS = (
    "network", "server_error", "rate_limited", "unauthorized", "conflict", "bad_request", "forbidden",
    "bad_response", "too_large", "inbox",
)
"""Why a polling channel's poll failed (the Telegram reasons of enact.channels.telegram_api, and ``inbox``)."""
CHANNEL_DELIVERY_ERROR_REASONS = CHANNEL_POLL_ERROR_REASONS[:-1]
CONTROL_ERROR_REASONS = (
    "too_many_connections",
    "idle_timeout",
    "bad_frame",
    "bad_message",
    "not_a_request",
    "no_actor",
    "unavailable",
    "failed",
    "fenced",
    "stopping",
    "reply_too_large",
    "disk_full",
)


class FeatureMetrics(Protocol):
    """A feature's own metrics (``enact.chat.metrics``, ``enact.tasks.metrics``,
    ...): a frozen value holding its prometheus objects and the label values
    they take. Its component creates it in the daemon's registry
    (``feature_metrics``) and the feature's actors reach it with
    ``Metrics.of``."""

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        """Register them in ``registry``, every known labelled series at 0."""
        ...


F = TypeVar("F", bound=FeatureMetrics)


def feature_metrics(registry: CollectorRegistry, kind: type[F]) -> F:
    """``kind``'s metrics in ``registry``, created on first use and then the
    same for whoever asks: the component creates them at start, before its
    actors count in them; an actor made without its component (as tests make
    them) creates them itself. A registry takes only one of each metric name,
    so this is the one way to make them."""
    with _FEATURES_LOCK:
        made = _FEATURES.setdefault(registry, {})
        found = made.get(kind)
        if found is None:
            found = made[kind] = kind.create(registry)
    return cast(F, found)


_FEATURES: weakref.WeakKeyDictionary[CollectorRegistry, dict[type[Any], Any]] = weakref.WeakKeyDictionary()
"""Each registry's features' metrics, gone with their registry: nothing is
shared between two daemons' (or two tests') registries."""
_FEATURES_LOCK = threading.Lock()


class Metrics:
    """The daemon-wide metrics (actors, epoch, control, runtime calls,
    channels), and each feature's through ``of``. Actors receive this object;
    nothing is global, so two daemons (or two tests) in one process never share
    counters."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # A ``_created`` series beside every counter and histogram series
        # (the time it was made) was most of ``/metrics`` and no alert reads
        # it. The switch is prometheus_client's, for the whole process, and
        # read when a registry is collected: every registry here goes without.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it untyped
        self.registry = registry or CollectorRegistry()
        self._took_over = False
        self._features: dict[type[Any], Any] = {}
        r = self.registry
        self.actor_messages = ActorMessages(r)
        """``enact_actor_messages_total`` and ``enact_actor_message_seconds``, by actor (``enact.message_metrics``)."""
        self.restarts = Counter("enact_actor_restarts", "Actor restarts by the supervisor", ["actor"], registry=r)
        self.generation = Gauge("enact_epoch_generation", "The epoch generation this daemon holds", registry=r)
        self.takeovers = Counter(
            "enact_epoch_takeovers",
            "1 when this daemon took the home over from a live owner (--takeover), else 0",
            registry=r,
        )
        # process_start_time_seconds lets an alert tell a recent takeover from
        # an old one: the takeover counter stays 1 for the new daemon's life.
        ProcessCollector(registry=r)
        self.build_info = Gauge("enact_build_info", "The running enact version", ["version"], registry=r)
        self.build_info.labels(version=__version__).set(1)
        self.control_errors = Counter(
            "enact_control_errors", "Control-socket requests refused, by reason", ["reason"], registry=r
        )
        self.runtime_calls = Counter(
            "enact_runtime_calls", "Runtime calls by adapter, outcome and purpose", ["adapter", "outcome", "purpose"],
            registry=r,
        )
        self.runtime_call_seconds = Histogram(
            "enact_runtime_call_seconds",
            "Duration of one runtime call, as enact saw it, by adapter and purpose",
            ["adapter", "purpose"],
            registry=r,
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
        )
        self.runtime_tokens = Counter(
            "enact_runtime_tokens",
            "Tokens runtime calls spent, by kind (input, cached_input, output, reasoning) and purpose",
            ["adapter", "kind", "purpose"],
            registry=r,
        )
        self.channel_poll_errors = Counter(
            "enact_channel_poll_errors", "Failed polls of a polling channel, by reason", ["channel", "reason"],
            registry=r,
        )
        self.channel_delivery_errors = Counter(
            "enact_channel_delivery_errors", "Failed channel calls while delivering a reply, by reason",
            ["channel", "reason"], registry=r,
        )
        self.channel_up = Gauge("enact_channel_up", "1 while a polling channel's last poll worked", ["channel"],
                                registry=r)
        self.callback_errors = Counter(
            "enact_actor_callback_errors",
            "Callbacks that raised after a committed write (a defect; the write stands)",
            ["actor"],
            registry=r,
        )
        self.long_work = Gauge(
            "enact_actor_long_work", "Work running off an actor's thread (a model call, a land, a task attempt)",
            ["actor"], registry=r,
        )

    def initialise(
        self,
        *,
        polling_channels: Sequence[str] = (),
        adapters: Sequence[str] = (),
    ) -> None:
        """Create every known labelled series at 0, so the first incident after
        a start is an increase that the alert rules can see. The actors' series
        are the supervisor's to create (one per actor and pool it runs), the
        features' their components' (``FeatureMetrics``)."""
        for channel in polling_channels:
            self.channel_up.labels(channel=channel)
            for reason in CHANNEL_POLL_ERROR_REASONS:
                self.channel_poll_errors.labels(channel=channel, reason=reason)
            for reason in CHANNEL_DELIVERY_ERROR_REASONS:
                self.channel_delivery_errors.labels(channel=channel, reason=reason)
        for adapter in adapters:
            for purpose in RUNTIME_PURPOSES:
                for outcome in RUNTIME_CALL_OUTCOMES:
                    self.runtime_calls.labels(adapter=adapter, outcome=outcome, purpose=purpose)
                self.runtime_call_seconds.labels(adapter=adapter, purpose=purpose)
                for kind in RUNTIME_TOKEN_KINDS:
                    self.runtime_tokens.labels(adapter=adapter, kind=kind, purpose=purpose)
        for reason in CONTROL_ERROR_REASONS:
            self.control_errors.labels(reason=reason)

    def of(self, kind: type[F]) -> F:
        """The feature's metrics ``kind`` in this daemon's registry, as its
        component created them (``feature_metrics``); kept here once found,
        since the hot paths ask for them at every event."""
        found = self._features.get(kind)
        if found is None:
            found = self._features[kind] = feature_metrics(self.registry, kind)
        return cast(F, found)

    def record_takeover(self) -> None:
        """This daemon took the home from a live owner; called once at start."""
        # Idempotent: the daemon took over once, however many places say so.
        if not self._took_over:
            self._took_over = True
            self.takeovers.inc()

    def register_gauges(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Add gauges computed at scrape time (mailbox depth, storage size)."""
        self.registry.register(_CallbackCollector(collect))


M = TypeVar("M", Counter, Gauge, Histogram)


class Children(Generic[M]):
    """A labelled metric's children by their label values, each made once:
    ``labels()`` costs a lock and a dozen Python calls, and the hot paths
    count at every event. ``children(value, ...)`` takes the values in the
    order of the metric's label names."""

    def __init__(self, metric: M) -> None:
        self._metric: M = metric
        self._made: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._made.get(values)
        if child is None:  # two threads may both make it: labels() gives both the same child
            child = self._made[values] = self._metric.labels(*values)
        return child


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
        stopping = threading.Thread(target=self.server.shutdown, name="enact-metrics-shutdown", daemon=True)
        stopping.start()
        # serve_forever sees the request to stop only when its select returns,
        # up to its poll interval later: a connection wakes it at once.
        host, port = self.server.server_address[:2]
        deadline = time.monotonic() + _WAKE_FOR_S
        while stopping.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection((str(host), port), timeout=0.1).close()
            stopping.join(0.02)
        stopping.join()
        self.server.server_close()


_WAKE_FOR_S = 1.0
"""How long a stop keeps waking the server before it waits out its poll."""
_POLL_S = 10.0
"""How often the idle server looks whether it is asked to stop (a stop
wakes it at once; prometheus-client's own server looks twice a second,
waking the idle daemon's one CPU for nothing)."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape under way does not hold the daemon's exit up


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is no news for the log."""


def serve(metrics: Metrics, address: str) -> MetricsServer:
    """prometheus-client's exposition (its WSGI application) on a server of
    our own, whose thread sleeps while nobody scrapes."""
    host, port = parse_address(address)
    # The family of the address given (an IPv6 one needs AF_INET6), as
    # prometheus-client's own start_http_server picks it.
    family, _, _, _, bound = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server_class = type("_MetricsServer", (_ThreadingServer,), {"address_family": family})
    server: WSGIServer = make_server(str(bound[0]), port, make_wsgi_app(metrics.registry), server_class=server_class,
                         handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, args=(_POLL_S,), name="enact-metrics", daemon=True)
    thread.start()
    return MetricsServer(server=server, thread=thread)


class MetricsUnavailable(EnactError, RuntimeError):
    """The metrics address cannot be served; the message is one line."""


_CHOOSE_ANOTHER = "choose another with --metrics-addr or daemon.metrics_addr (port 0 picks a free one)"


def bind_metrics(metrics: Metrics, address: str, *, replaced: Owner | None) -> MetricsServer | None:
    """Serve ``address`` now, or return None when it is held by ``replaced``,
    the daemon a takeover is about to fence (bind it with
    ``wait_for_metrics`` once fenced). Raises MetricsUnavailable."""
    try:
        return serve(metrics, address)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            problem = f"cannot serve metrics on {address}: {error.strerror}"
            raise MetricsUnavailable(f"{problem}; {_CHOOSE_ANOTHER}") from None
    if replaced is None:
        raise MetricsUnavailable(f"metrics address {address} is already in use; {_CHOOSE_ANOTHER}")
    if replaced.metrics_addr and _port(replaced.metrics_addr) != _port(address):
        raise MetricsUnavailable(
            f"metrics address {address} is in use by another program, not by the daemon being replaced "
            f"(pid {replaced.pid} serves {replaced.metrics_addr}); nothing was taken over; {_CHOOSE_ANOTHER}"
        )
    return None


def wait_for_metrics(metrics: Metrics, address: str, *, holder: Owner | None, wait_s: float) -> MetricsServer:
    """Bind ``address`` once the fenced daemon ``holder`` lets go of it."""
    who = f"the daemon being replaced (pid {holder.pid})" if holder is not None else "the daemon being replaced"
    log.info("metrics address %s is held by %s; waiting up to %g s for it to let go", address, who, wait_s)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return serve(metrics, address)
        except OSError as error:
            if error.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                raise MetricsUnavailable(
                    f"metrics address {address} is still in use {wait_s:g} s after taking over from {who}, which "
                    f"is fenced and stops by itself; start again once it has exited, or {_CHOOSE_ANOTHER}"
                ) from None
        time.sleep(0.05)


def _port(address: str) -> int:
    try:
        return parse_address(address)[1]
    except ValueError:
        return -1
