"""Replies larger than a frame: large answers come in pages or clipped with a
note, and a reply that still cannot fit is a ``control.Error`` naming its
size, never a connection closed without a word."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import orjson
from control_wire import RawClient, status_frame

from enact._app.control import ControlServer
from enact.chat.turns import CLIPPED_TEXT_CHARS, PAGE_BYTES, _Page
from enact.memory.context import MAX_DECISIONS
from enact.messages._framing import MAX_FRAME_BYTES
from enact.messages.control import ActorStatus, Status, StatusReport, StorageStatus
from enact.messages.inbox import ActionRecord, Turn
from enact.messages.memory import Remember
from enact.metrics import Metrics

from conftest import DaemonFactory, run_cli


def _huge_status(_: Status) -> StatusReport:
    return StatusReport(version="x", pid=1, home="h" * (MAX_FRAME_BYTES + 10), generation=1, uptime_s=0.0,
                        metrics_addr="", actors=(ActorStatus(name="a", alive=True, mailbox=0, handled=0, restarts=0),),
                        storage=StorageStatus(path="", map_bytes=0, used_bytes=0, databases=0))


def test_a_reply_over_the_frame_is_a_control_error_naming_its_size() -> None:
    home = Path(tempfile.mkdtemp(prefix="enact-big-", dir="/tmp"))
    server = ControlServer(home, None, Metrics(), idle_timeout_s=5, request_timeout_s=5)  # type: ignore[arg-type]
    server.serve_locally(Status, _huge_status)
    try:
        server.start()
        for _ in range(2):  # and the server goes on serving
            client = RawClient(home)
            client.send(status_frame())
            reply = client.recv()
            assert reply is not None and reply["type"] == "control.Error", reply
            message = reply["body"]["message"]
            size = len(orjson.dumps({"type": "control.StatusReport", "body": _huge_status(Status())}))
            assert message.startswith(f"the reply (control.StatusReport) is {size} bytes, over the ")
            assert f"{MAX_FRAME_BYTES}-byte frame" in message
            client.assert_closed()
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def _send_many(home: Path, count: int, chars: int) -> None:
    from enact.cli._client import Client
    from enact.messages.local import Send

    with Client(home, timeout=60) as client:
        for index in range(count):
            client.request(Send(text=f"{index:03d} " + "y" * chars, message_id=f"big-{index}"))


def test_turns_larger_than_a_frame_come_in_pages_that_read_on_from_the_cursor(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    _send_many(daemon.home, 24, 60_000)  # each turn about 120 KB (message and echoed reply): 2.9 MB in all
    seen: list[str] = []
    since = 0
    pages = 0
    while True:
        result = daemon.cli("turns", "--json", "--since", str(since))
        assert result.returncode == 0, result.stderr
        turns = orjson.loads(result.stdout)
        if not turns:
            break
        pages += 1
        assert len(result.stdout.encode()) < MAX_FRAME_BYTES
        seen += [turn["message"][:3] for turn in turns]
        since = turns[-1]["cursor"]
        if len(seen) < 24:
            assert result.stderr.strip() == f"(fewer turns than asked for, to keep the reply under 1 MiB: " \
                                             f"read on with --since {since})"
    assert seen == [f"{index:03d}" for index in range(24)] and pages >= 3
    plain = daemon.cli("turns")
    *_, next_cursor, note = plain.stdout.splitlines()
    assert plain.returncode == 0 and next_cursor.startswith("(next cursor: ")
    assert note.endswith(f"read on with --since {next_cursor.removeprefix('(next cursor: ').rstrip(')')})")
    newest = daemon.cli("turns", "--json", "--last", "24")
    assert newest.returncode == 0, newest.stderr
    newest_turns = orjson.loads(newest.stdout)
    assert 0 < len(newest_turns) < 24 and newest_turns[-1]["message"].startswith("023")
    assert "older ones are left out" in newest.stderr
    assert "FrameError" not in daemon.log_text() and daemon.process.poll() is None


def _turn(**texts: str) -> Turn:
    return Turn(cursor=1, event_id="e", channel="local", conversation="cli", message_id="m", time=0.0,
                outcome="replied", attempts=1, message=texts.get("message", ""), reply=texts.get("reply", ""),
                actions=(ActionRecord(command="c", args={"a": "b" * 10_000}, receipt="r" * 10_000, ok=True),))


def test_a_single_turn_larger_than_a_page_is_clipped_with_a_note_in_each_text() -> None:
    page = _Page()
    assert page.add(_turn(message="m" * 60_000, reply="\x01" * 200_000))  # escapes: 1.2 MB of JSON
    [clipped] = page.turns
    assert clipped.reply.startswith("\x01" * CLIPPED_TEXT_CHARS)
    assert clipped.reply.endswith(f"… [clipped: {200_000 - CLIPPED_TEXT_CHARS} more characters]")
    assert clipped.message.endswith(f"[clipped: {60_000 - CLIPPED_TEXT_CHARS} more characters]")
    [action] = clipped.actions
    assert action.args == {"clipped": f"{len(orjson.dumps({'a': 'b' * 10_000}))} bytes of arguments left out"}
    assert action.receipt.endswith("more characters]")
    assert len(orjson.dumps(clipped)) < PAGE_BYTES
    assert not page.add(_turn(message="next"))  # the page is full: read on from the cursor
    assert page.full


def test_memory_context_with_more_facts_than_it_explains_says_how_many_it_left_out(
    daemons: DaemonFactory,
) -> None:
    from enact.cli._client import Client

    daemon = daemons.start()
    count = MAX_DECISIONS + 300
    started = time.monotonic()
    with Client(daemon.home, timeout=60) as client:
        for index in range(count):
            client.request(Remember(text=f"fact number {index} about topic {index * 7919 % 10007}"))
    assert time.monotonic() - started < 120
    shown = daemon.cli_json("memory", "context", "--json")
    decisions = shown["decisions"]
    assert len(decisions) == MAX_DECISIONS and shown["decisions_left_out"] == 300
    assert {d["fact_id"] for d in decisions if d["included"]} == set(shown["startup_ids"])
    plain = run_cli(daemon.home, "memory", "context")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.rstrip().endswith("… and 300 facts left out, not explained here (the reply is limited)")


def test_memory_list_larger_than_a_frame_lists_a_page_and_says_how_many_more(daemons: DaemonFactory) -> None:
    from enact.cli._client import Client

    daemon = daemons.start(env={"ENACT_MEMORY_MAX_FACT_CHARS": "10000"})
    with Client(daemon.home, timeout=60) as client:
        for index in range(150):  # 1.4 MB of facts
            client.request(Remember(text=f"{index:03d} " + "z" * 9_000))
    listed = daemon.cli_json("memory", "list", "--json")
    assert listed["total"] == 150 and 0 < len(listed["facts"]) < 150
    plain = run_cli(daemon.home, "memory", "list")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.rstrip().endswith(f"… and {150 - len(listed['facts'])} more")


def test_explained_keeps_every_inclusion_and_counts_what_it_leaves_out() -> None:
    from enact.memory.context import Decision, explained

    decisions = tuple(Decision(fact_id=f"f{index}", section="startup", included=index % 3 == 0, reason="r")
                      for index in range(30))
    kept, left_out = explained(decisions, limit=12)
    assert len(kept) == 12 and left_out == 18
    assert [d.fact_id for d in kept if d.included] == [f"f{index}" for index in range(0, 30, 3)]
    assert [d.fact_id for d in kept] == sorted((d.fact_id for d in kept), key=lambda name: int(name[1:]))
    assert explained(decisions[:5], limit=12) == (decisions[:5], 0)
