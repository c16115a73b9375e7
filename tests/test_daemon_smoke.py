from __future__ import annotations

from conftest import DaemonFactory


def test_daemon_starts_reports_status_and_stops_on_sigterm(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    status = daemon.cli_json("status", "--json")
    assert status["pid"] == daemon.pid
    assert status["generation"] == 1
    assert {"version", "pid", "home", "generation", "uptime_s", "metrics_addr", "actor_names"} <= set(status)
    assert daemon.terminate() == 0
