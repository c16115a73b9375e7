"""Takeover on the configured metrics address: it always ends with exactly one
daemon serving the home, the new one, or with a one-line refusal (exit 2) that
leaves the old daemon serving."""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Daemon, DaemonFactory, enact_env, wait_for

BUMP_RULES = """
[[rule]]
match = "bump"
action = "bump"
then = "Bumped: {receipt}"
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def metrics_served_by(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        return str(response.read().decode())


def logged_at(log: str, text: str) -> datetime.datetime:
    line = next((line for line in log.splitlines() if text in line), None)
    assert line is not None, f"{text!r} not in the log:\n{log}"
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def bump_home(daemons: DaemonFactory) -> tuple[Path, Path]:
    """A home whose every message runs one effect: a program appending a line."""
    home = daemons.new_home()
    effects = home.parent / "bumps.txt"
    (home / "scripted.toml").write_text(BUMP_RULES)
    (home / "commands.toml").write_text(
        textwrap.dedent(
            f"""
            [[command]]
            name = "bump"
            summary = "appends a line, slowly"
            run = ["sh", "-c", "echo x >> {effects}; sleep 0.05; echo bumped"]
            """
        )
    )
    return home, effects


def assert_takeover_ends_with_the_new_daemon(old: Daemon, new: Daemon, address: str) -> None:
    status = new.cli_json("status", "--json")
    assert status["pid"] == new.pid
    assert status["metrics_addr"] == address
    assert old.wait_exit(10) == 0, old.log_text()
    # The old daemon let go within a second of noticing, with no traceback.
    noticed = logged_at(old.log_text(), "this daemon is fenced")
    stopped = logged_at(old.log_text(), "stopped (fenced)")
    assert (stopped - noticed).total_seconds() < 1.0, old.log_text()
    assert "Traceback" not in old.log_text()
    assert "Traceback" not in new.log_text()
    assert 'enact_epoch_generation' in metrics_served_by(address)


def test_takeover_on_the_same_metrics_address_leaves_the_new_daemon_serving(daemons: DaemonFactory) -> None:
    address = f"127.0.0.1:{free_port()}"
    old = daemons.start(None, "--metrics-addr", address)
    new = daemons.start(old.home, "--metrics-addr", address, "--takeover")
    assert new.cli_json("status", "--json")["generation"] == 2
    assert_takeover_ends_with_the_new_daemon(old, new, address)
    assert "waiting up to" in new.log_text()  # the wait for the address, in one line
    assert new.terminate() == 0


@pytest.fixture
def senders(daemons: DaemonFactory) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def start_senders(home: Path, count: int, messages: int) -> list[subprocess.Popen[str]]:
    """Shell loops of `enact send`, one conversation each, that keep going
    whatever a single send answers."""
    loops = []
    for index in range(count):
        script = (
            f'for n in $(seq 1 {messages}); do "{sys.executable}" -m enact send --conversation s{index} '
            f'--message-id s{index}-$n "bump $n" >/dev/null 2>&1; done'
        )
        loops.append(
            subprocess.Popen(["sh", "-c", script], env=enact_env(home), stdout=subprocess.PIPE, text=True)
        )
    return loops


def test_takeover_under_load_exits_the_old_daemon_within_a_second(
    daemons: DaemonFactory, senders: list[subprocess.Popen[str]]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    home, effects = bump_home(daemons)
    old = daemons.start(home, "--metrics-addr", address)
    senders.extend(start_senders(home, 3, 1000))
    wait_for(lambda: effects.exists() and len(effects.read_text().splitlines()) >= 10, what="the senders' progress")
    new = daemons.start(home, "--metrics-addr", address, "--takeover")
    assert_takeover_ends_with_the_new_daemon(old, new, address)
    # The senders carry on against the new daemon.
    at_takeover = len(effects.read_text().splitlines())
    wait_for(lambda: len(effects.read_text().splitlines()) >= at_takeover + 10, what="effects on the new daemon")


def test_ten_takeovers_in_a_row_each_leave_one_daemon(daemons: DaemonFactory) -> None:
    address = f"127.0.0.1:{free_port()}"
    current = daemons.start(None, "--metrics-addr", address)
    for generation in range(2, 12):
        successor = daemons.start(current.home, "--metrics-addr", address, "--takeover")
        assert successor.cli_json("status", "--json")["generation"] == generation
        assert current.wait_exit(10) == 0, current.log_text()
        current = successor
    assert metrics_served_by(address).count("enact_epoch_generation 11.0") == 1
    assert current.terminate() == 0


def test_takeover_refused_when_another_program_holds_the_metrics_address(daemons: DaemonFactory) -> None:
    old = daemons.start()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = f"127.0.0.1:{squatter.getsockname()[1]}"
        new = daemons.start(old.home, "--metrics-addr", taken, "--takeover", wait=False)
        assert new.wait_exit(30) == 2
    lines = new.log_text().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"enact: metrics address {taken} is in use by another program"), lines
    assert "nothing was taken over" in lines[0]
    # The old daemon was not fenced and still serves the home.
    assert old.process.poll() is None
    status = old.cli_json("status", "--json")
    assert status["pid"] == old.pid and status["generation"] == 1
    assert old.cli_json("call", "epoch.RequireCurrent")["type"] == "epoch.Current"


def test_start_on_a_metrics_address_in_use_exits_2_with_one_line(daemons: DaemonFactory) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = f"127.0.0.1:{squatter.getsockname()[1]}"
        daemon = daemons.start(None, "--metrics-addr", taken, wait=False)
        assert daemon.wait_exit(30) == 2
    lines = daemon.log_text().strip().splitlines()
    assert lines == [
        f"enact: metrics address {taken} is already in use; choose another with --metrics-addr or "
        "daemon.metrics_addr (port 0 picks a free one)"
    ]
    # Nothing is left behind: the next start on the home works.
    again = daemons.start(daemon.home)
    assert again.cli_json("status", "--json")["generation"] == 1


def test_takeover_whose_old_daemon_never_lets_go_exits_2_and_the_next_start_works(daemons: DaemonFactory) -> None:
    address = f"127.0.0.1:{free_port()}"
    old = daemons.start(None, "--metrics-addr", address)
    os.kill(old.pid, signal.SIGSTOP)  # frozen: it cannot notice the fence nor free the address
    try:
        new = daemons.start(old.home, "--metrics-addr", address, "--takeover", wait=False,
                            env={"ENACT_DAEMON_TAKEOVER_WAIT_S": "0.5"})
        assert new.wait_exit(30) == 2
    finally:
        os.kill(old.pid, signal.SIGCONT)
    [line] = [line for line in new.log_text().splitlines() if line.startswith("enact:")]
    assert line.startswith(f"enact: metrics address {address} is still in use 0.5 s after taking over"), line
    assert "Traceback" not in new.log_text()
    assert old.wait_exit(10) == 0  # fenced, it exits once it runs again
    again = daemons.start(old.home, "--metrics-addr", address)
    status = again.cli_json("status", "--json")
    assert status["generation"] == 3 and status["metrics_addr"] == address
