"""Graceful stop: SIGTERM, SIGINT and `enact daemon stop` all exit 0 and clean up."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest
from control_wire import RawClient, status_frame

from enact.home import SOCKET_NAME

from conftest import Daemon, DaemonFactory, wait_for


def _by_signal(signum: signal.Signals) -> Callable[[Daemon], None]:
    def stop(daemon: Daemon) -> None:
        daemon.process.send_signal(signum)

    return stop


def _by_cli(daemon: Daemon) -> None:
    result = daemon.cli("daemon", "stop")
    assert result.returncode == 0, result
    assert result.stdout.strip() == f"stopped (pid {daemon.pid})"
    # `daemon stop` returns only once the process has gone.
    assert daemon.process.poll() is not None, "daemon stop returned while the daemon still ran"


STOPS: dict[str, Callable[[Daemon], None]] = {
    "SIGTERM": _by_signal(signal.SIGTERM),
    "SIGINT": _by_signal(signal.SIGINT),
    "daemon-stop": _by_cli,
}


@pytest.mark.parametrize("stop", list(STOPS.values()), ids=list(STOPS))
def test_stop_exits_0_and_removes_the_socket(daemons: DaemonFactory, stop: Callable[[Daemon], None]) -> None:
    daemon = daemons.start()
    assert daemon.cli("call", "epoch.RequireCurrent").returncode == 0
    with RawClient(daemon.home) as idle:  # an idle client does not hold the daemon up
        assert idle.ask(status_frame())["body"]["pid"] == daemon.pid
        stop(daemon)
        assert daemon.wait_exit(15) == 0, daemon.log_text()
    assert not (daemon.home / SOCKET_NAME).exists()
    log = daemon.log_text()
    assert "stopped" in log and "Traceback" not in log, log
    after = daemon.cli("daemon", "status")
    assert after.returncode == 3
    # The home is reusable at once: the next daemon gets the next generation.
    again = daemons.start(daemon.home)
    assert again.cli_json("status", "--json")["generation"] == 2


def test_sigusr1_writes_every_threads_stack_to_the_log_and_the_daemon_carries_on(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    daemon.process.send_signal(signal.SIGUSR1)
    # Threads are written one after another: wait for the two looked for.
    wait_for(lambda: all(f"Current state of {name}" in daemon.log_text() for name in ("enact-control", "MainThread")),
             what="the dump of both threads")
    log = daemon.log_text()
    assert "Current state of MainThread" in log
    assert "CRITICAL pykka" in log
    with RawClient(daemon.home) as client:  # still serving
        assert client.ask(status_frame())["body"]["pid"] == daemon.pid
    assert daemon.terminate() == 0
