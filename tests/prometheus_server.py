"""A real Prometheus for the tests: the shipped scrape config and alert
rules (``deploy/prometheus/``) aimed at a test daemon, and its HTTP API."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from conftest import wait_for

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(api: str, path: str, **params: str) -> Any:
    """``path`` of the API, its ``status`` checked; the document's ``data``."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{api}{path}{query}", timeout=10) as response:
        document = orjson.loads(response.read())
    assert document["status"] == "success", document
    return document["data"]


def query(api: str, promql: str) -> list[dict[str, Any]]:
    """The instant vector ``promql`` is now."""
    result = get(api, "/api/v1/query", query=promql)["result"]
    assert isinstance(result, list)
    return result


def _scrape_config(target: str) -> str:
    text = (PROMETHEUS_DIR / "prometheus.yml").read_text()
    assert 'targets: ["127.0.0.1:9464"]' in text, "the shipped config changed shape; update this helper"
    assert "  - alerts.yml\n" in text
    text = text.replace('targets: ["127.0.0.1:9464"]', f'targets: ["{target}"]')
    return text.replace("  - alerts.yml\n", f"  - {PROMETHEUS_DIR / 'alerts.yml'}\n")


@contextlib.contextmanager
def running_prometheus(prometheus: str, target: str) -> Iterator[str]:
    """A real Prometheus scraping ``target`` with the shipped config and alert
    rules (both every second); yields its API base URL once it has scraped
    ``target`` up."""
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

            def scraped() -> bool:
                assert server.poll() is None, log_path.read_text()
                try:
                    up[:] = query(api, 'up{job="enact"}')
                except OSError:  # not listening yet
                    up.clear()
                return bool(up) and up[0]["value"][1] == "1"

            wait_for(scraped, timeout=30, what=f"Prometheus to scrape the daemon (its log: {log_path})")
            assert up[0]["metric"]["instance"] == target
            yield api
        finally:
            server.kill()
            server.wait(10)
