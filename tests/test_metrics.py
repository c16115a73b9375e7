"""The Prometheus endpoint, scraped over HTTP and by a real Prometheus server."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from prometheus_server import get, query, running_prometheus
from roster_services import daemon_actors, daemon_parts, roster_services

from enact import __version__
from enact import metrics as metric_labels
from enact.backup.metrics import BackupMetrics
from enact.channels.local import LocalChannel
from enact.chat.component import ChatComponent
from enact.chat.metrics import ChatMetrics
from enact.memory.component import MemoryComponent
from enact.memory.metrics import MemoryMetrics
from enact.messages.commands import CommandOutcome
from enact.metrics import Metrics, feature_metrics
from enact.runtime import RuntimeCancelled, RuntimeFailure, RuntimeTimeout
from enact.tasks.metrics import TasksMetrics, WorkerTime
from enact.tasks.records import EventKind

from conftest import Daemon, DaemonFactory, wait_for

REPO = Path(__file__).resolve().parent.parent


def scrape(daemon: Daemon) -> str:
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        assert response.status == 200
        return str(response.read().decode())


def samples(text: str, name: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def value(text: str, name: str, **labels: str) -> float:
    matching = [s for s in samples(text, name) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matching) == 1, f"{name}{labels}: {matching}"
    return float(matching[0].value)


def test_metrics_endpoint_exports_the_foundation_metrics(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    assert daemon.cli("call", "epoch.RequireCurrent").returncode == 0
    text = scrape(daemon)

    assert f'enact_build_info{{version="{__version__}"}} 1.0' in text
    assert value(text, "enact_build_info", version=__version__) == 1
    assert value(text, "enact_epoch_generation") == 1
    assert value(text, "enact_actor_messages_total", actor="epoch", type="epoch.RequireCurrent") >= 1
    buckets = [s for s in samples(text, "enact_actor_message_seconds_bucket") if s.labels["actor"] == "epoch"]
    assert buckets and buckets[-1].labels["le"] == "+Inf" and buckets[-1].value >= 1
    assert value(text, "enact_actor_message_seconds_count", actor="epoch") >= 1
    assert value(text, "enact_actor_mailbox_depth", actor="epoch") == 0
    map_bytes = value(text, "enact_storage_map_bytes")
    used_bytes = value(text, "enact_storage_used_bytes")
    assert 0 < used_bytes <= map_bytes
    assert "# TYPE enact_actor_restarts_total counter" in text


def test_the_metrics_page_has_no_created_series_beside_the_counters(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    assert daemon.cli("call", "epoch.Describe").returncode == 0  # a counter and a histogram that moved
    text = scrape(daemon)
    assert value(text, "enact_actor_messages_total", actor="epoch", type="epoch.Describe") == 1
    assert "# TYPE enact_actor_message_seconds histogram" in text
    assert [line for line in text.splitlines() if "_created" in line] == []


def test_every_known_labelled_series_is_exported_at_zero_from_the_start(daemons: DaemonFactory) -> None:
    text = scrape(daemons.start())
    families = [family for spec in daemon_actors(roster_services()) for family in spec.families]
    assert {"workers", "worker", "conversation"} <= set(families)
    for actor in families:
        assert value(text, "enact_actor_restarts_total", actor=actor) == 0
        assert value(text, "enact_actor_callback_errors_total", actor=actor) == 0
    for kind in EventKind:
        assert value(text, "enact_task_events_total", event=kind.value) == 0
    for outcome in ChatMetrics.INBOX_EVENT_OUTCOMES:
        assert value(text, "enact_inbox_events_total", channel="local", outcome=outcome) == 0
    for outcome in ChatMetrics.DELIVERY_OUTCOMES:
        assert value(text, "enact_inbox_deliveries_total", channel="local", outcome=outcome) == 0
    for outcome in ChatMetrics.ACTION_OUTCOMES:
        assert value(text, "enact_conversation_actions_total", outcome=outcome) == 0
    for purpose in metric_labels.RUNTIME_PURPOSES:
        assert value(text, "enact_runtime_call_seconds_count", adapter="scripted", purpose=purpose) == 0
        for outcome in metric_labels.RUNTIME_CALL_OUTCOMES:
            assert value(text, "enact_runtime_calls_total", adapter="scripted", outcome=outcome, purpose=purpose) == 0
    for state in TasksMetrics.COUNTED_STATES:
        assert value(text, "enact_tasks", state=state.value) == 0
    assert value(text, "enact_task_workers") > 0
    assert value(text, "enact_task_worker_busy_seconds_total") == 0
    assert value(text, "enact_memory_recall_seconds_count") == 0
    for outcome in TasksMetrics.LAND_OUTCOMES:
        assert value(text, "enact_review_lands_total", outcome=outcome) == 0
    for outcome in TasksMetrics.CRON_OUTCOMES:
        assert value(text, "enact_cron_runs_total", outcome=outcome) == 0
    for reason in metric_labels.CONTROL_ERROR_REASONS:
        assert value(text, "enact_control_errors_total", reason=reason) == 0


def _counted_literals(label: str) -> set[str]:
    """Every ``label="..."`` literal passed to ``.labels(`` in the package."""
    found: set[str] = set()
    for path in (REPO / "enact").rglob("*.py"):
        for call in re.findall(r"\.labels\(([^)]*)\)", path.read_text()):
            found.update(re.findall(rf'\b{label}="(\w+)"', call))
    return found


def test_every_outcome_the_code_counts_is_declared_for_initialisation() -> None:
    declared = {
        *ChatMetrics.INBOX_EVENT_OUTCOMES,
        *ChatMetrics.DELIVERY_OUTCOMES,
        *ChatMetrics.ACTION_OUTCOMES,
        *metric_labels.RUNTIME_CALL_OUTCOMES,
        *TasksMetrics.LAND_OUTCOMES,
        *TasksMetrics.CRON_OUTCOMES,
        *BackupMetrics.OUTCOMES,
    }
    assert _counted_literals("outcome") <= declared
    assert _counted_literals("reason") <= set(metric_labels.CONTROL_ERROR_REASONS)
    # Outcomes computed rather than written out where they are counted.
    kinds = {failure.kind for failure in (RuntimeFailure, RuntimeTimeout, RuntimeCancelled)}
    assert kinds <= set(metric_labels.RUNTIME_CALL_OUTCOMES)
    assert {outcome.value for outcome in CommandOutcome} <= set(ChatMetrics.ACTION_OUTCOMES)


def test_a_features_metrics_are_made_once_per_registry_and_reached_by_type() -> None:
    metrics, other = Metrics(), Metrics()
    MemoryComponent().metrics(metrics.registry)
    made = metrics.of(MemoryMetrics)
    assert made is metrics.of(MemoryMetrics) is feature_metrics(metrics.registry, MemoryMetrics)
    assert metrics.registry.get_sample_value("enact_memory_facts", {"state": "pending"}) == 0
    # Another daemon's registry has its own, made on first use (an actor built without its component).
    assert other.of(MemoryMetrics) is not made
    other.of(MemoryMetrics).facts.labels(state="active").set(3)
    assert metrics.registry.get_sample_value("enact_memory_facts", {"state": "active"}) == 0


def test_worker_busy_seconds_count_the_running_attempts_so_far_and_the_ended_ones_whole() -> None:
    now = [100.0]
    worker_time = WorkerTime(clock=lambda: now[0])
    with worker_time.busy():
        now[0] += 3
        assert worker_time.busy_seconds() == 3  # scraped mid-attempt: counted so far
        with worker_time.busy():  # a second worker, for 1 s
            now[0] += 1
        assert worker_time.busy_seconds() == 4 + 1
    with contextlib.suppress(KeyError), worker_time.busy():  # an attempt that raised still counts
        now[0] += 2
        raise KeyError("a defect")
    now[0] += 50  # idle: nothing more
    assert worker_time.busy_seconds() == 4 + 1 + 2
    [family] = worker_time.collect()
    assert (family.name, family.type, family.samples[0].value) == ("enact_task_worker_busy_seconds", "counter", 7)


def test_chat_creates_each_channels_series_at_zero_once_given_the_channels(tmp_path: Path) -> None:
    metrics = Metrics()
    chat = ChatComponent()
    chat.metrics(metrics.registry)
    chat.actors(dataclasses.replace(daemon_parts(tmp_path), channels={"local": LocalChannel(),
                                                                      "second": LocalChannel()}))
    for channel in ("local", "second"):
        for outcome in ChatMetrics.INBOX_EVENT_OUTCOMES:
            labels = {"channel": channel, "outcome": outcome}
            assert metrics.registry.get_sample_value("enact_inbox_events_total", labels) == 0
        for outcome in ChatMetrics.DELIVERY_OUTCOMES:
            labels = {"channel": channel, "outcome": outcome}
            assert metrics.registry.get_sample_value("enact_inbox_deliveries_total", labels) == 0


def test_message_counter_follows_calls(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    before = scrape(daemon)
    assert not [s for s in samples(before, "enact_actor_messages_total") if s.labels["type"] == "epoch.Describe"]
    for _ in range(3):
        assert daemon.cli("call", "epoch.Describe").returncode == 0
    after = scrape(daemon)
    assert value(after, "enact_actor_messages_total", actor="epoch", type="epoch.Describe") == 3


def test_generation_gauge_follows_a_takeover(daemons: DaemonFactory) -> None:
    old = daemons.start()
    new = daemons.start(old.home, "--takeover")
    assert value(scrape(new), "enact_epoch_generation") == 2
    assert old.wait_exit(10) == 0


def test_takeovers_count_a_takeover_of_a_live_daemon_and_not_a_restart(daemons: DaemonFactory) -> None:
    first = daemons.start()
    assert value(scrape(first), "enact_epoch_takeovers_total") == 0
    assert first.terminate() == 0
    restarted = daemons.start(first.home)
    text = scrape(restarted)
    assert value(text, "enact_epoch_generation") == 2
    assert value(text, "enact_epoch_takeovers_total") == 0
    # The alert bounds a takeover by the daemon's start time.
    assert value(text, "process_start_time_seconds") > 0

    took_over = daemons.start(first.home, "--takeover")
    assert value(scrape(took_over), "enact_epoch_takeovers_total") == 1
    assert restarted.wait_exit(10) == 0


def test_metrics_listen_on_loopback_only(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    host = daemon.cli_json("status", "--json")["metrics_addr"].rpartition(":")[0]
    assert host == "127.0.0.1"


# -- a real Prometheus ---------------------------------------------------------


def test_prometheus_scrapes_the_daemon(daemons: DaemonFactory, require_binary: Callable[[str], str]) -> None:
    prometheus = require_binary("prometheus")
    daemon = daemons.start()
    with running_prometheus(prometheus, daemon.cli_json("status", "--json")["metrics_addr"]) as api:
        build = query(api, 'enact_build_info{job="enact"}')
        assert build, "no enact_build_info series in Prometheus"
        assert build[0]["metric"]["version"] == __version__
        # The alert rules loaded from the shipped file.
        rules = get(api, "/api/v1/rules")
        names = {rule["name"] for group in rules["groups"] for rule in group["rules"]}
        assert "EnactDown" in names


def test_a_reply_not_delivered_right_after_start_fires_its_alert(
    daemons: DaemonFactory, require_binary: Callable[[str], str]
) -> None:
    prometheus = require_binary("prometheus")
    home = daemons.new_home()
    refuse = home.parent / "refuse-delivery.sh"
    refuse.write_text("#!/bin/sh\nexit 1\n")
    refuse.chmod(0o755)
    (home / "config.toml").write_text(f'[chat]\nlocal_deliver_command = "{refuse}"\ndelivery_backoff_s = 0.05\n')
    daemon = daemons.start(home)
    failed = 'enact_inbox_deliveries_total{job="enact", channel="local", outcome="failed"}'
    with running_prometheus(prometheus, daemon.cli_json("status", "--json")["metrics_addr"]) as api:
        [series] = query(api, failed)
        assert series["value"][1] == "0", "the series must exist at 0 before the incident"
        daemon.cli("send", "hello")  # every delivery attempt fails; the exit code is not the point here

        def alerts() -> list[dict[str, Any]]:
            return [a for a in get(api, "/api/v1/alerts")["alerts"]
                    if a["labels"]["alertname"] == "EnactRepliesNotDelivered"]

        try:
            wait_for(alerts, timeout=20, what="the alert")
        except AssertionError:
            raise AssertionError(f"no alert; series now {query(api, failed)}") from None
        [alert] = alerts()
        assert alert["state"] in ("pending", "firing")
        assert alert["labels"]["outcome"] == "failed" and alert["labels"]["channel"] == "local"
        assert not [a for a in get(api, "/api/v1/alerts")["alerts"]
                    if a["labels"]["alertname"] in ("EnactActorRestarting", "EnactEventsFailing", "EnactTakeover")]
