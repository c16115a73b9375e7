"""The Prometheus endpoint, scraped over HTTP and by a real Prometheus server."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from enact import __version__

from conftest import Daemon, DaemonFactory

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"


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
    # A labelled counter has no series until first used; its family is declared.
    assert "# HELP enact_actor_restarts_total " in text
    assert "# TYPE enact_actor_restarts_total counter" in text


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


def test_metrics_listen_on_loopback_only(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    host = daemon.cli_json("status", "--json")["metrics_addr"].rpartition(":")[0]
    assert host == "127.0.0.1"


# -- a real Prometheus ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _query(api: str, promql: str) -> list[dict[str, Any]]:
    url = f"{api}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=5) as response:
        document = orjson.loads(response.read())
    assert document["status"] == "success", document
    result = document["data"]["result"]
    assert isinstance(result, list)
    return result


def _scrape_config(target: str) -> str:
    text = (PROMETHEUS_DIR / "prometheus.yml").read_text()
    assert 'targets: ["127.0.0.1:9464"]' in text, "the shipped config changed shape; update this test"
    assert "  - alerts.yml\n" in text
    text = text.replace('targets: ["127.0.0.1:9464"]', f'targets: ["{target}"]')
    return text.replace("  - alerts.yml\n", f"  - {PROMETHEUS_DIR / 'alerts.yml'}\n")


def test_prometheus_scrapes_the_daemon(daemons: DaemonFactory, require_binary: Callable[[str], str]) -> None:
    prometheus = require_binary("prometheus")
    daemon = daemons.start()
    target = daemon.cli_json("status", "--json")["metrics_addr"]
    with tempfile.TemporaryDirectory(prefix="enact-prom-") as scratch:
        config = Path(scratch) / "prometheus.yml"
        config.write_text(_scrape_config(target))
        port = _free_port()
        api = f"http://127.0.0.1:{port}"
        log_path = Path(scratch) / "prometheus.log"
        with open(log_path, "wb") as log:
            server = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={Path(scratch) / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            up: list[dict[str, Any]] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                assert server.poll() is None, log_path.read_text()
                try:
                    up = _query(api, 'up{job="enact"}')
                except OSError:
                    up = []
                if up and up[0]["value"][1] == "1":
                    break
                time.sleep(0.25)
            assert up and up[0]["value"][1] == "1", f"up={up}\n{log_path.read_text()}"
            assert up[0]["metric"]["instance"] == target

            build = _query(api, 'enact_build_info{job="enact"}')
            assert build, "no enact_build_info series in Prometheus"
            assert build[0]["metric"]["version"] == __version__
            # The alert rules loaded from the shipped file.
            with urllib.request.urlopen(f"{api}/api/v1/rules", timeout=5) as response:
                rules = orjson.loads(response.read())
            names = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
            assert "EnactDown" in names
        finally:
            server.kill()
            server.wait(10)
