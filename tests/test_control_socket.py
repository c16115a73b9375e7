"""The control socket, spoken to by raw clients against a real daemon process."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import select
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from control_wire import LENGTH, MAX_FRAME_BYTES, RawClient, example_body, example_value, status_frame
from home_state import snapshot, values_under

from enact._app.control import ControlServer, _stamp_origin
from enact.home import SOCKET_NAME
from enact.messages import Kind, Registration, registered
from enact.messages._codec import decode_dataclass
from enact.messages.accounting import PurposeSpending
from enact.messages.budget import BudgetLine
from enact.messages.channel import ChannelState
from enact.messages.common import HUMAN_CLI, MODEL_ACTION
from enact.messages.epoch import Current, RequireCurrent
from enact.metrics import Metrics

from conftest import Daemon, DaemonFactory


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the bad-input tests: each leaves it as it found it."""
    factory = DaemonFactory()
    try:
        yield factory.start()
    finally:
        factory.close()


def _assert_status(reply: dict[str, Any], pid: int) -> None:
    assert reply["type"] == "control.StatusReport", reply
    assert reply["body"]["pid"] == pid


def _assert_refused(client: RawClient, *phrases: str) -> str:
    """The daemon answered control.Error naming the problem, then hung up."""
    reply = client.recv()
    assert reply is not None, "the connection closed without a control.Error reply"
    assert reply["type"] == "control.Error", reply
    message = reply["body"]["message"]
    assert isinstance(message, str) and message
    for phrase in phrases:
        assert phrase in message, f"{phrase!r} not in {message!r}"
    client.assert_closed()
    return message


# -- permissions ---------------------------------------------------------------


def test_socket_is_mode_0600_in_a_directory_only_the_owner_can_enter(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    home.chmod(0o755)  # the daemon must close it up itself
    daemons.start(home)
    mode = os.stat(home / SOCKET_NAME).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(os.stat(home).st_mode) & 0o077 == 0


_CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except PermissionError:
    sys.exit(13)
"""


def test_another_user_cannot_connect(daemons: DaemonFactory) -> None:
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or system_python is None:
        pytest.skip("needs root (to run a client as another user) and a system python3")
    home = daemons.new_home()
    home.chmod(0o755)
    home.parent.chmod(0o711)  # only the daemon's own permissions stand in the way
    daemons.start(home)
    result = subprocess.run(
        [system_python, "-I", "-c", _CONNECT, str(home / SOCKET_NAME)],
        user=65534,
        group=65534,
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 13, result.stderr


# -- bad input -----------------------------------------------------------------


def _frame(document: object) -> bytes:
    return orjson.dumps(document)


BAD_FRAMES: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "invalid-json": (b'{"type": "control.Status", "body": {', ("not valid JSON",)),
    "not-utf8": (b"\xff\xfe{}", ("not valid JSON",)),
    "empty": (b"", ("not valid JSON",)),
    "not-an-object": (b"[1, 2, 3]", ("JSON object",)),
    "missing-type": (_frame({"body": {}}), ("'type'",)),
    "type-not-a-string": (_frame({"type": 7, "body": {}}), ("'type'",)),
    "unknown-type": (_frame({"type": "nope.Nothing", "body": {}}), ("unknown message type", "nope.Nothing")),
    "unexpected-key": (_frame({"type": "control.Status", "body": {}, "extra": 1}), ("unexpected keys", "extra")),
    "unknown-field": (_frame({"type": "control.Status", "body": {"bogus": 1}}), ("unknown field", "bogus")),
    "body-not-an-object": (_frame({"type": "epoch.RequireCurrent", "body": 5}), ("expected an object",)),
    "missing-field": (_frame({"type": "epoch.Current", "body": {}}), ("missing field", "generation")),
    "wrong-field-type": (
        _frame({"type": "epoch.Owner", "body": {"generation": "one", "pid": 1, "host": "h", "started_at": 0}}),
        ("generation", "expected int"),
    ),
    "wrong-nested-field-type": (
        _frame({"type": "control.StatusReport", "body": {
            "version": "0", "pid": 1, "home": "/", "generation": 1, "uptime_s": 0.0, "metrics_addr": "",
            "actors": [{"name": "a", "alive": "yes", "mailbox": 0, "handled": 0, "restarts": 0}],
            "storage": {"path": "/", "map_bytes": 0, "used_bytes": 0, "databases": 0},
        }}),
        ("actors[0].alive", "expected bool"),
    ),
}


@pytest.mark.parametrize(("frame", "phrases"), list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
def test_bad_frame_gets_an_error_and_closes_without_disturbing_others(
    daemon: Daemon, frame: bytes, phrases: tuple[str, ...]
) -> None:
    with RawClient(daemon.home) as witness, RawClient(daemon.home) as bad:
        _assert_status(witness.ask(status_frame()), daemon.pid)
        bad.send_frame(frame)
        _assert_refused(bad, *phrases)
        _assert_status(witness.ask(status_frame()), daemon.pid)
    with RawClient(daemon.home) as after:
        _assert_status(after.ask(status_frame()), daemon.pid)


def _not_requests() -> list[Registration]:
    return [r for r in registered() if r.kind is not Kind.REQUEST]


@pytest.mark.parametrize("registration", _not_requests(), ids=lambda r: r.name)
def test_a_reply_or_internal_type_is_refused_as_a_request(daemon: Daemon, registration: Registration) -> None:
    with RawClient(daemon.home) as witness, RawClient(daemon.home) as bad:
        _assert_status(witness.ask(status_frame()), daemon.pid)
        bad.send({"type": registration.name, "body": example_body(registration.cls)})
        _assert_refused(bad, registration.name, "not a request")
        _assert_status(witness.ask(status_frame()), daemon.pid)


def test_oversized_frame_is_refused_from_its_header(daemon: Daemon) -> None:
    with RawClient(daemon.home) as witness, RawClient(daemon.home) as bad:
        _assert_status(witness.ask(status_frame()), daemon.pid)
        bad.send_raw(LENGTH.pack(MAX_FRAME_BYTES + 1))  # the body never comes
        _assert_refused(bad, "exceeds the limit", str(MAX_FRAME_BYTES))
        _assert_status(witness.ask(status_frame()), daemon.pid)


def test_oversized_frame_with_its_body_is_refused(daemon: Daemon) -> None:
    body = orjson.dumps(status_frame()) + b" " * (2 * MAX_FRAME_BYTES)
    with RawClient(daemon.home) as bad:
        # The daemon hangs up while the body is still coming: sending fails,
        # but the refusal was written first and can be read.
        sender = threading.Thread(target=_send_ignoring_errors, args=(bad, LENGTH.pack(len(body)) + body))
        sender.start()
        _assert_refused(bad, "exceeds the limit")
        sender.join(10)
    with RawClient(daemon.home) as after:
        _assert_status(after.ask(status_frame()), daemon.pid)


def _send_ignoring_errors(client: RawClient, data: bytes) -> None:
    with contextlib.suppress(OSError):
        client.send_raw(data)


def test_huge_length_header_is_refused(daemon: Daemon) -> None:
    with RawClient(daemon.home) as bad:
        bad.send_raw(b"\xff\xff\xff\xff")
        _assert_refused(bad, "exceeds the limit")
    with RawClient(daemon.home) as after:
        _assert_status(after.ask(status_frame()), daemon.pid)


def test_frame_of_exactly_the_limit_is_accepted(daemon: Daemon) -> None:
    payload = orjson.dumps(status_frame())
    padded = payload + b" " * (MAX_FRAME_BYTES - len(payload))  # JSON allows trailing whitespace
    with RawClient(daemon.home) as client:
        client.send_frame(padded)
        reply = client.recv()
        assert reply is not None
        _assert_status(reply, daemon.pid)


def test_client_that_hangs_up_inside_a_frame_does_not_disturb_the_daemon(daemon: Daemon) -> None:
    with RawClient(daemon.home) as witness:
        _assert_status(witness.ask(status_frame()), daemon.pid)
        for partial in (b"\x00\x00", LENGTH.pack(100) + b'{"type"'):
            with RawClient(daemon.home) as quitter:
                quitter.send_raw(partial)
        _assert_status(witness.ask(status_frame()), daemon.pid)
    assert daemon.process.poll() is None


# -- the status an older release's updater reads ------------------------------
# The updater that runs an update is the serving release's: an older one asks
# this daemon ``control.Status`` with an empty body and reads the reply with
# the rule below (fields it does not know dropped, then a strict decode) into
# its own StatusReport, whose shape these records are (``actors`` records and
# ``storage`` required, as before ``Status.brief``).


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _OlderActorStatus:
    name: str
    alive: bool
    mailbox: int
    handled: int
    restarts: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _OlderSchemaVersion:
    database: str
    version: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _OlderStorageStatus:
    path: str
    map_bytes: int
    used_bytes: int
    databases: int
    schemas: tuple[_OlderSchemaVersion, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _OlderStatusReport:
    version: str
    pid: int
    home: str
    generation: int
    uptime_s: float
    metrics_addr: str
    actors: tuple[_OlderActorStatus, ...]
    storage: _OlderStorageStatus
    spending: tuple[PurposeSpending, ...] = ()
    channels: tuple[ChannelState, ...] = ()
    confinement: str = ""
    revision: str = ""
    home_id: str = ""
    budget: tuple[BudgetLine, ...] = ()
    budget_resets_at: float = 0.0


def test_an_older_releases_updater_reads_the_status_it_asks_with_an_empty_body(daemon: Daemon) -> None:
    from enact.update.daemons import _known_fields  # the rule the older updater reads with, unchanged since

    with RawClient(daemon.home) as client:
        reply = client.ask({"type": "control.Status", "body": {}})
    assert reply["type"] == "control.StatusReport", reply
    older = decode_dataclass(_OlderStatusReport, _known_fields(_OlderStatusReport, reply["body"]), path="")
    assert older.pid == daemon.pid and older.generation == 1
    assert "epoch" in [actor.name for actor in older.actors] and all(actor.alive for actor in older.actors)
    assert [actor.name for actor in older.actors] == reply["body"]["actor_names"]
    assert 0 < older.storage.used_bytes <= older.storage.map_bytes
    assert _OlderSchemaVersion(database="epoch", version=1) in older.storage.schemas


def test_a_brief_status_leaves_out_the_records_and_the_storage(daemon: Daemon) -> None:
    with RawClient(daemon.home) as client:
        brief = client.ask({"type": "control.Status", "body": {"brief": True}})["body"]
        full = client.ask(status_frame())["body"]
    assert (brief["actors"], brief["storage"]) == ([], None)
    assert brief["actor_names"] == full["actor_names"] and "epoch" in brief["actor_names"]
    assert (brief["stopped"], brief["restarts"], brief["runtime"]) == ([], {}, "scripted")
    assert len(orjson.dumps(brief)) < len(orjson.dumps(full)) // 2


def test_connection_stays_open_across_good_requests(daemon: Daemon) -> None:
    with RawClient(daemon.home) as client:
        for _ in range(5):
            _assert_status(client.ask(status_frame()), daemon.pid)
            reply = client.ask({"type": "epoch.RequireCurrent", "body": {}})
            assert reply == {"type": "epoch.Current", "body": {"generation": 1}}


def test_requests_sent_together_in_one_write_are_each_answered_in_order(daemon: Daemon) -> None:
    """The server receives as much as has arrived at once: a request that
    came in behind another is kept for the next read, not lost."""
    frames = [orjson.dumps(document) for document in (
        status_frame(), {"type": "epoch.RequireCurrent", "body": {}}, status_frame())]
    with RawClient(daemon.home) as client:
        client.send_raw(b"".join(LENGTH.pack(len(frame)) + frame for frame in frames))
        replies = [client.recv() for _ in frames]
    assert [reply["type"] if reply else None for reply in replies] == [
        "control.StatusReport", "epoch.Current", "control.StatusReport"]


def test_a_frame_sent_again_on_one_connection_is_answered_afresh(daemon: Daemon) -> None:
    """A connection keeps its last request decoded and its last reply
    encoded: the same frame again is still answered as of now (the status's
    uptime moves on), and a bad frame after a good one is still refused."""
    brief = {"type": "control.Status", "body": {"brief": True}}
    with RawClient(daemon.home) as client:
        first, second = client.ask(brief)["body"], client.ask(brief)["body"]
        assert second["uptime_s"] >= first["uptime_s"]
        assert {**second, "uptime_s": 0} == {**first, "uptime_s": 0}
        client.send({"type": "control.Status", "body": {"brief": 1}})
        _assert_refused(client, "brief")


def test_a_client_sending_one_request_again_still_refuses_a_bad_one(daemon: Daemon) -> None:
    """The client checks a frame once and keeps the last reply decoded: a
    request after the same one is answered afresh, and one the daemon would
    refuse is refused before it is sent, in one line."""
    from enact.cli._client import BadRequest, Client
    from enact.messages.control import Status, StatusReport
    from enact.messages.memory import MAX_TEXT, Remember

    with Client(daemon.home, timeout=10) as client:
        first, second = client.request(Status(brief=True)), client.request(Status(brief=True))
        assert isinstance(first, StatusReport) and second.uptime_s >= first.uptime_s
        with pytest.raises(BadRequest, match="too long"):
            client.send(Remember(text="x" * (MAX_TEXT + 1), origin=HUMAN_CLI))
        assert client.request(Status(brief=True)).pid == daemon.pid


def test_many_clients_at_once_are_all_served(daemon: Daemon) -> None:
    clients, rounds = 32, 5
    barrier = threading.Barrier(clients)
    failures: list[str] = []
    answered = [0] * clients

    def work(index: int) -> None:
        try:
            with RawClient(daemon.home, timeout=30) as client:
                barrier.wait(timeout=30)
                for _ in range(rounds):
                    _assert_status(client.ask(status_frame()), daemon.pid)
                    answered[index] += 1
                reply = client.ask({"type": "epoch.RequireCurrent", "body": {}})
                assert reply["type"] == "epoch.Current", reply
                answered[index] += 1
            with RawClient(daemon.home, timeout=30) as fresh:  # a connection per request works too
                _assert_status(fresh.ask(status_frame()), daemon.pid)
                answered[index] += 1
        except BaseException as error:  # reported below, in the test's thread
            failures.append(f"client {index}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "some clients were not answered within 60 s"
    assert failures == []
    assert answered == [rounds + 2] * clients


# -- idle connections ----------------------------------------------------------


def test_idle_connection_is_closed_after_the_idle_timeout(daemons: DaemonFactory) -> None:
    idle_timeout_s = 0.5
    daemon = daemons.start(env={"ENACT_CONTROL_IDLE_TIMEOUT_S": str(idle_timeout_s)})
    with RawClient(daemon.home) as busy, RawClient(daemon.home) as idle, RawClient(daemon.home) as stalled:
        connected = time.monotonic()
        stalled.send_raw(b"\x00\x00")  # half a header, then nothing
        refused_after: dict[RawClient, float] = {}
        # The busy client asks far more often than the timeout until both
        # others have their refusal; select returns as soon as one arrives.
        while len(refused_after) < 2:
            _assert_status(busy.ask(status_frame()), daemon.pid)
            waiting = {client.sock: client for client in (idle, stalled) if client not in refused_after}
            readable, _, _ = select.select(list(waiting), [], [], idle_timeout_s / 5)
            refused_after.update((waiting[sock], time.monotonic() - connected) for sock in readable)
            assert time.monotonic() - connected < 30, "the idle connections were not closed within 30 s"
        for client in (idle, stalled):
            _assert_refused(client, "idle")
        # Connected before the others and answered after their timeout: requests keep it open.
        _assert_status(busy.ask(status_frame()), daemon.pid)
    # Closed once the timeout passed, not before and not left open.
    assert all(idle_timeout_s - 0.1 <= after < 5 for after in refused_after.values()), refused_after


# -- origin --------------------------------------------------------------------


def _origin_requests() -> list[Registration]:
    return [
        r
        for r in registered()
        if r.kind is Kind.REQUEST and any(f.name == "origin" for f in dataclasses.fields(r.cls))
    ]


_ORIGIN_CASES = [pytest.param(r, id=r.name) for r in _origin_requests()] or [
    pytest.param(None, id="none-yet", marks=pytest.mark.skip(reason="no registered request has an origin field yet"))
]


# A chat origin counts as a human: the most useful origin to forge.
FORGED_ORIGIN = "chat:forged-by-test"

# Where the generic example body would be refused before anything is stored,
# enough real values for the request to get through to its actor.
ORIGIN_OVERRIDES: dict[str, dict[str, Any]] = {
    "inbox.Receive": {"event": {"channel": "local", "conversation": "origin-test", "message_id": "m1",
                                "text": "hello", "cursor": None}},
    "commands.Run": {"name": "status"},
}


@pytest.mark.parametrize("registration", _ORIGIN_CASES)
def test_a_frame_cannot_choose_its_origin(daemons: DaemonFactory, registration: Registration) -> None:
    """Send the request claiming a forged origin; the forged value must come
    back nowhere and be stored nowhere (checked in LMDB once the daemon has
    stopped), and every origin stored is the one the socket stamps."""
    daemon = daemons.start()
    body = example_body(registration.cls, **ORIGIN_OVERRIDES.get(registration.name, {}), origin=FORGED_ORIGIN)
    with RawClient(daemon.home, timeout=60) as client:
        reply = client.ask({"type": registration.name, "body": body})
    assert FORGED_ORIGIN not in orjson.dumps(reply).decode(), f"the forged origin came back: {reply}"
    if reply["type"] == "control.Error":
        assert "origin" not in reply["body"]["message"], reply
    assert daemon.terminate() == 0

    stored_origins = set()
    for database, key, raw in snapshot(daemon.home).values():
        assert FORGED_ORIGIN.encode() not in raw, f"the forged origin was stored in {database!r} at {key!r}"
        with contextlib.suppress(orjson.JSONDecodeError):
            stored_origins.update(str(o) for o in values_under(orjson.loads(raw), "origin"))
    assert stored_origins <= {HUMAN_CLI, MODEL_ACTION}, stored_origins


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Effect:
    text: str
    origin: str


@pytest.mark.parametrize(
    "cls", [_Effect, *(r.cls for r in _origin_requests())], ids=lambda c: getattr(c, "__name__", str(c))
)
def test_the_server_stamps_human_cli_over_any_claimed_origin(cls: type[Any]) -> None:
    hints = typing.get_type_hints(cls)
    fields = {f.name: example_value(hints[f.name]) for f in dataclasses.fields(cls)}
    fields["origin"] = MODEL_ACTION
    message = cls(**fields)
    assert _stamp_origin(message, HUMAN_CLI).origin == HUMAN_CLI


# -- the socket path across a takeover -----------------------------------------


def _race_stop_against_start(home: Path, metrics: Metrics, spins: int) -> list[BaseException]:
    old = ControlServer(home, None, metrics, idle_timeout_s=1, request_timeout_s=1)  # type: ignore[arg-type]
    new = ControlServer(home, None, metrics, idle_timeout_s=1, request_timeout_s=1)  # type: ignore[arg-type]
    old.start()
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def stop_old() -> None:
        barrier.wait()
        old.stop()

    def start_new() -> None:
        barrier.wait()
        for _ in range(spins):  # a few microseconds at most, to vary the interleaving
            pass
        try:
            new.start()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=stop_old), threading.Thread(target=start_new)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    if not failures and not (home / SOCKET_NAME).exists():
        failures.append(AssertionError("the old server removed the new server's socket"))
    new.stop()
    return failures


def test_a_stopping_server_never_removes_a_newer_servers_socket() -> None:
    """In a takeover the new daemon binds the path while the old one stops.
    Race the two, in one process with real sockets, many times: the newer
    socket must survive every interleaving (inode numbers are reused at once,
    so the old server's "is it still mine?" check needs care)."""
    metrics = Metrics()
    jitter = random.Random(1234)
    for attempt in range(400):
        home = Path(tempfile.mkdtemp(prefix="enact-race-", dir="/tmp"))
        try:
            failures = _race_stop_against_start(home, metrics, jitter.randrange(1000))
            assert failures == [], f"attempt {attempt}: {failures[0]!r}"
            assert not (home / SOCKET_NAME).exists()
        finally:
            shutil.rmtree(home, ignore_errors=True)


# -- a stopping server ---------------------------------------------------------


class _StoppingUnderTheRequest:
    """Stands in for the supervisor of a daemon that is taken over while it
    answers: the server stops, then the actor asked is gone."""

    def __init__(self, server: ControlServer) -> None:
        self.server = server

    def call(self, actor: str, message: object, timeout: float) -> object:
        from enact.actors._asks import ActorNotFound

        self.server.stop("taken over by generation 2")
        raise ActorNotFound("accounting")


def test_a_request_its_stopping_daemon_cannot_answer_is_told_the_daemon_is_stopping() -> None:
    """Not which actor went first: a takeover's client learns to try again."""
    home = Path(tempfile.mkdtemp(prefix="enact-stop-", dir="/tmp"))
    server = ControlServer(home, None, Metrics(), idle_timeout_s=5, request_timeout_s=5)  # type: ignore[arg-type]
    server._supervisor = _StoppingUnderTheRequest(server)  # type: ignore[assignment]
    try:
        server.start()
        client = RawClient(home)
        client.send(status_frame())
        message = _assert_refused(client, "is stopping", "taken over by generation 2", "try again")
        assert "accounting" not in message
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def test_a_frame_that_arrives_once_the_server_stopped_is_not_routed() -> None:
    home = Path(tempfile.mkdtemp(prefix="enact-stop-", dir="/tmp"))
    server = ControlServer(home, None, Metrics(), idle_timeout_s=5, request_timeout_s=5)  # type: ignore[arg-type]
    try:
        server.start()
        server.serve_locally(RequireCurrent, lambda request: Current(generation=1))
        client = RawClient(home)
        # Answered once: its connection is served and waits for the next frame.
        assert client.ask({"type": "epoch.RequireCurrent", "body": {}})["type"] == "epoch.Current"
        server.stop("received SIGTERM")
        client.send(status_frame())  # routing it would fail: this server has no supervisor
        _assert_refused(client, "is stopping (received SIGTERM)")
    finally:
        shutil.rmtree(home, ignore_errors=True)
