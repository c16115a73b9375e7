"""The epoch fence with real processes: two daemons on one home never both act."""

from __future__ import annotations

import datetime
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from control_wire import RawClient, status_frame
from home_state import Snapshot, snapshot

from enact.home import LOCK_NAME, SOCKET_NAME

from conftest import DaemonFactory, enact_env, wait_for

FENCE_WRITER = Path(__file__).with_name("fence_writer.py")
REQUIRE_CURRENT = {"type": "epoch.RequireCurrent", "body": {}}


# -- what is on disk -----------------------------------------------------------


def generation_on_disk(snap: Snapshot) -> int:
    return int.from_bytes(snap.databases[b"epoch"][b"generation"], "big")


def socket_inode(home: Path) -> int:
    return os.stat(home / SOCKET_NAME).st_ino


def _logged_at(log: str, text: str) -> datetime.datetime:
    """When the first log line containing ``text`` was written."""
    line = next((line for line in log.splitlines() if text in line), None)
    assert line is not None, f"{text!r} not in the log:\n{log}"
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


# -- refusal -------------------------------------------------------------------


def test_second_daemon_run_on_a_home_is_refused_with_exit_2(daemons: DaemonFactory) -> None:
    first = daemons.start()
    inode = socket_inode(first.home)
    second = daemons.start(first.home, wait=False)
    assert second.wait_exit(30) == 2, second.log_text()
    lines = second.log_text().splitlines()
    assert lines[-1] == f"enact is already running on this home (pid {first.pid}, generation 1)", lines
    # The refused daemon touched nothing of the first one's.
    assert socket_inode(first.home) == inode
    with RawClient(first.home) as client:
        assert client.ask(status_frame())["body"]["pid"] == first.pid
        assert client.ask(REQUIRE_CURRENT) == {"type": "epoch.Current", "body": {"generation": 1}}
    assert generation_on_disk(snapshot(first.home)) == 1


# -- takeover ------------------------------------------------------------------


class _Prober:
    """Asks a daemon RequireCurrent over one connection opened before the
    takeover (it outlives the socket path being replaced), until it closes."""

    def __init__(self, home: Path) -> None:
        self.client = RawClient(home, timeout=30)
        assert self.client.ask(REQUIRE_CURRENT)["type"] == "epoch.Current"
        self.replies: list[tuple[float, str]] = []  # (time the request was sent, reply type)
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                sent = time.monotonic()
                self.client.send(REQUIRE_CURRENT)
                reply = self.client.recv()
                if reply is None:
                    return
                self.replies.append((sent, reply["type"]))
                if reply["type"] == "control.Error":
                    return
                time.sleep(0.01)
        except OSError:
            return
        finally:
            self.closed.set()
            self.client.close()

    def wait_closed(self, timeout: float) -> None:
        assert self.closed.wait(timeout), "the old daemon kept its connection open"

    def types_sent_after(self, moment: float) -> set[str]:
        return {kind for sent, kind in self.replies if sent > moment}


def test_takeover_fences_the_old_daemon_which_exits(daemons: DaemonFactory) -> None:
    old = daemons.start()
    prober = _Prober(old.home)
    new = daemons.start(old.home, "--takeover")
    ready = time.monotonic()
    assert new.cli_json("status", "--json")["generation"] == 2

    assert old.wait_exit(10) == 0, old.log_text()
    assert time.monotonic() - ready < 5, "the old daemon took too long to notice the takeover"
    # It noticed within a second of the new daemon committing its generation.
    # The new daemon logs its line just after the commit, so the old one may
    # log a few milliseconds earlier.
    took_over = _logged_at(new.log_text(), "as generation 2")
    noticed = _logged_at(old.log_text(), "stopping: taken over by generation 2")
    assert -0.1 <= (noticed - took_over).total_seconds() < 1.0, (took_over, noticed)
    prober.wait_closed(10)
    assert "epoch.Current" not in prober.types_sent_after(ready), prober.replies

    # The new daemon answers on the path, and the old one did not unlink it.
    with RawClient(new.home) as client:
        assert client.ask(status_frame())["body"]["pid"] == new.pid
        assert client.ask(REQUIRE_CURRENT) == {"type": "epoch.Current", "body": {"generation": 2}}
        owner = client.ask({"type": "epoch.Describe", "body": {}})
    assert owner["body"]["pid"] == new.pid and owner["body"]["generation"] == 2


def test_old_daemon_performs_no_write_after_the_takeover(daemons: DaemonFactory) -> None:
    """Freeze the old daemon so that it cannot notice anything, take the home
    over, take a snapshot of everything committed, then let the old daemon run
    into the fence: nothing it does afterwards may reach the disk or the
    new daemon's socket. (The new daemon is idle meanwhile: no requests.)"""
    old = daemons.start()
    prober_client = RawClient(old.home, timeout=30)
    os.kill(old.pid, signal.SIGSTOP)
    try:
        new = daemons.start(old.home, "--takeover")
        new_socket = socket_inode(new.home)
        before = snapshot(new.home)
        assert generation_on_disk(before) == 2
        assert before.document("epoch", b"owner")["pid"] == new.pid
        # Waiting on the frozen daemon's connection: answered only after it thaws.
        prober_client.send(REQUIRE_CURRENT)
    finally:
        os.kill(old.pid, signal.SIGCONT)

    assert old.wait_exit(10) == 0, old.log_text()
    assert "taken over by generation 2" in old.log_text()
    try:
        late = prober_client.recv()
    except ConnectionResetError:
        late = None  # it exited with the request unread: also no answer
    prober_client.close()
    assert late is None or late["type"] in {"epoch.Fenced", "control.Error"}, late
    if late is not None and late["type"] == "epoch.Fenced":
        assert late["body"] == {"generation": 1, "current_generation": 2}

    after = snapshot(new.home)
    assert after.last_txnid == before.last_txnid, "a write transaction was committed after the takeover"
    assert after.databases == before.databases
    assert socket_inode(new.home) == new_socket, "the old daemon replaced or removed the new daemon's socket"
    with RawClient(new.home) as client:
        assert client.ask(status_frame())["body"]["pid"] == new.pid
        assert client.ask(REQUIRE_CURRENT) == {"type": "epoch.Current", "body": {"generation": 2}}


def test_after_a_takeover_the_new_daemon_holds_the_lock(daemons: DaemonFactory) -> None:
    old = daemons.start()
    new = daemons.start(old.home, "--takeover")
    assert old.wait_exit(10) == 0
    # The new daemon takes the lock once the old one lets go, and says so.
    wait_for(lambda: (old.home / LOCK_NAME).read_text().strip() == str(new.pid), 10, "the lock to change hands")
    third = daemons.start(old.home, wait=False)
    assert third.wait_exit(30) == 2, third.log_text()
    assert third.log_text().splitlines()[-1] == (
        f"enact is already running on this home (pid {new.pid}, generation 2)"
    )
    assert new.cli_json("status", "--json")["pid"] == new.pid


def test_takeover_with_no_daemon_running_just_starts(daemons: DaemonFactory) -> None:
    daemon = daemons.start(None, "--takeover")
    assert daemon.cli_json("status", "--json")["generation"] == 1
    assert daemon.terminate() == 0


# -- kill -9 -------------------------------------------------------------------


def test_after_kill_9_a_new_daemon_starts_cleanly_with_the_next_generation(daemons: DaemonFactory) -> None:
    first = daemons.start()
    first.kill9()
    assert (first.home / SOCKET_NAME).exists() and (first.home / LOCK_NAME).exists()

    second = daemons.start(first.home)  # ready: its own pid answers on the socket
    status = second.cli_json("status", "--json")
    assert status["pid"] == second.pid and status["generation"] == 2
    assert second.cli_json("call", "epoch.RequireCurrent") == {"type": "epoch.Current", "body": {"generation": 2}}
    assert "Traceback" not in second.log_text()
    assert second.terminate() == 0
    assert not (second.home / SOCKET_NAME).exists()
    final = snapshot(second.home)
    assert generation_on_disk(final) == 2
    assert final.document("epoch", b"owner")["pid"] == second.pid


# -- the Fence itself, in two helper processes ----------------------------------


class _Helper:
    """A fence_writer.py process whose JSON-line events are read with timeouts."""

    def __init__(self, home: Path, mode: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FENCE_WRITER), str(home), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=enact_env(home),
        )
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._events.put(orjson.loads(line))
        self._events.put(None)

    def next(self, event: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {event!r} event within {timeout} s") from None
            if item is None:
                assert self.process.stderr is not None
                raise AssertionError(f"helper exited before {event!r}: {self.process.stderr.read().decode()}")
            if item["event"] == event:
                return item

    def finish(self, timeout: float = 30) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def helpers() -> Iterator[list[_Helper]]:
    started: list[_Helper] = []
    yield started
    for helper in started:
        helper.kill()


def test_every_fenced_write_of_the_old_owner_fails_after_a_takeover(
    daemons: DaemonFactory, helpers: list[_Helper]
) -> None:
    home = daemons.new_home()
    writer = _Helper(home, "write")
    helpers.append(writer)
    assert writer.next("acquired")["generation"] == 1
    writer.next("writing")  # it has committed some fenced writes as the owner

    usurper = _Helper(home, "takeover")
    helpers.append(usurper)
    assert usurper.next("acquired")["generation"] == 2
    at_takeover = usurper.next("count")["records"]

    assert writer.next("fenced")["current"] == 2
    done = writer.next("done")
    assert done["fenced"] == 50, done
    assert done["late"] == 0, "a fenced write landed after one had been refused"
    assert done["written"] == at_takeover, "a write of the old owner landed after the takeover"
    assert done["is_current"] is False
    assert writer.process.wait(30) == 0
    assert usurper.finish() == 0

    records = snapshot(home).databases[b"test.records"]
    assert len(records) == at_takeover
    assert {orjson.loads(raw)["generation"] for raw in records.values()} == {1}


def test_a_fenced_owner_cannot_write_after_releasing_its_fence(
    daemons: DaemonFactory, helpers: list[_Helper]
) -> None:
    """A stopping daemon releases its fence before closing storage; an actor
    that overran the shutdown timeout may still try to write in between. Once
    superseded, that write must be refused like any other."""
    home = daemons.new_home()
    old = _Helper(home, "release")
    helpers.append(old)
    assert old.next("acquired")["generation"] == 1
    usurper = _Helper(home, "takeover")
    helpers.append(usurper)
    assert usurper.next("acquired")["generation"] == 2
    at_takeover = usurper.next("count")["records"]

    assert old.process.stdin is not None
    old.process.stdin.write(b"taken over\n")
    old.process.stdin.flush()
    result = old.next("after-release")
    assert result["landed"] is False, "a superseded daemon wrote after releasing its fence"
    assert "superseded by generation 2" in result["error"]
    assert old.process.wait(30) == 0
    assert usurper.finish() == 0
    assert len(snapshot(home).databases.get(b"test.records", {})) == at_takeover == 0
