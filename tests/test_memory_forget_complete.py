"""Forget is complete: durable with the fact's deletion, finished after a
kill -9, and reaching every copy enact keeps and sends to a model (the turn
log with ``--redact``, the ``openai`` runtime's kept history, the native
sessions that may hold the fact)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import lmdb
import model_anthropic  # noqa: F401  (registers /v1/messages)
import model_chat  # noqa: F401  (registers /v1/chat/completions)
import orjson
import pytest
from claude_home import claude_env
from model_server import ModelServer, Reply

from enact.chat.inbox_records import DATABASES as INBOX_DATABASES
from enact.chat.inbox_records import TURNS, InboxRecords
from enact.home import STATE_DIR
from enact.memory.book import FACTS
from enact.memory.forgetting import FORGETTING
from enact.messages.inbox import Turn
from enact.storage import Storage

from conftest import Daemon, DaemonFactory, enact_env, real_cli, wait_for

ROUNDS = 6
TURNS_HOLDING = 400
_PLACES = ("blue pot", "red mat", "old boot", "tin box", "oak shelf", "green jar")
_FILLER = "the owner talked about the weather and the garden for a while. " * 60


def _texts() -> list[str]:
    return [f"the spare key of round {n} is under the {_PLACES[n]}" for n in range(ROUNDS)]


def _plant_turns(home: Path, texts: list[str]) -> None:
    """Turns that hold every text, long ones, in a stopped daemon's home (as
    months of conversation would leave them)."""
    message = " ".join(f"{_FILLER} note that {text}." for text in texts)
    storage = Storage(home / STATE_DIR)
    try:
        records = InboxRecords(storage.grant("inbox", INBOX_DATABASES))

        def plant(txn: lmdb.Transaction) -> None:
            for number in range(TURNS_HOLDING):
                records.turns.append(txn, Turn(
                    event_id=f"planted-{number}", channel="local", conversation="cli", message_id=str(number),
                    message=message, reply="Noted.", time=1.0, outcome="replied", attempts=1, actions=()))

        storage.grant("inbox", INBOX_DATABASES).write(plant, fenced=False)
    finally:
        storage.close()


def _read(home: Path, database: str) -> dict[bytes, bytes]:
    """One database as committed; read-only, safe while a daemon runs."""
    env = lmdb.open(str(home / STATE_DIR), readonly=True, max_dbs=64, lock=True)
    try:
        with env.begin() as txn:
            if txn.get(database.encode()) is None:
                return {}
            handle = env.open_db(database.encode(), txn=txn, create=False)
            return {bytes(key): bytes(value) for key, value in txn.cursor(db=handle)}
    finally:
        env.close()


def _turns_holding(home: Path, text: str) -> int:
    return sum(text.encode() in raw for raw in _read(home, TURNS).values())


def _remember(daemon: Daemon, text: str) -> str:
    fact_id: str = daemon.cli_json("memory", "remember", "--json", text)["id"]
    return fact_id


def test_a_kill_9_right_after_a_forget_was_accepted_leaves_no_turn_holding_the_text(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemons.start(home).terminate()
    texts = _texts()
    _plant_turns(home, texts)
    daemon = daemons.start(home)
    cut_short = 0
    for text in texts:
        fact = _remember(daemon, text)
        forget = subprocess.Popen([sys.executable, "-m", "enact", "memory", "forget", fact, "--redact", "--json"],
                                  env=enact_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Accepted: the fact's deletion is committed. Killed at once after.
        wait_for(lambda: fact.encode() not in _read(home, FACTS), timeout=30,  # noqa: B023
                 what="the forget to be accepted", every=0.001)
        daemon.kill9()
        forget.wait(30)
        holding = _turns_holding(home, text)
        assert holding in (0, TURNS_HOLDING)  # the turn log is rewritten in one transaction
        cut_short += holding > 0
        daemon = daemons.start(home)
        wait_for(lambda: _turns_holding(home, text) == 0, timeout=60,  # noqa: B023
                 what=f"the forgetting of {fact} finished after the restart")
        wait_for(lambda: not _read(home, FORGETTING), what="the intent deleted once finished")
        assert daemon.cli_json("memory", "list", "--json")["facts"] == []
        # The other rounds' texts are untouched: only the forgotten one goes.
        later = texts[texts.index(text) + 1:]
        assert all(_turns_holding(home, other) == TURNS_HOLDING for other in later)
    # The kill landed between the deletion and the rewrite in some rounds at
    # least (the rewrite of 400 long turns takes far longer than the poll).
    assert cut_short >= 1, "no round was cut short: the test did not test the crash"


_BAD_TURN = 10**9


def _unreadable_turn(home: Path, *, present: bool) -> None:
    """Plant (or remove) one unreadable turn record, so the Inbox fails any
    whole-log rewrite, in a stopped daemon's home."""
    from enact.storage import AppendLog

    env = lmdb.open(str(home / STATE_DIR), max_dbs=64, map_size=64 << 20)
    try:
        turns = env.open_db(TURNS.encode())
        with env.begin(write=True, db=turns) as txn:
            if present:
                txn.put(AppendLog.key(_BAD_TURN), b"\xffnot a record")
            else:
                txn.delete(AppendLog.key(_BAD_TURN))
    finally:
        env.close()


def _forget(daemon: Daemon, selector: str) -> dict[str, Any]:
    result = daemon.cli("memory", "forget", selector, "--redact", "--json")
    reply: dict[str, Any] = orjson.loads(result.stdout)
    return reply


def test_a_forgetting_not_finished_is_finished_by_forgetting_again_and_at_the_next_start(
        daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemons.start(home).terminate()
    text = _texts()[0]
    _plant_turns(home, [text])
    _unreadable_turn(home, present=True)
    daemon = daemons.start(home)
    fact = _remember(daemon, text)
    first = _forget(daemon, fact)
    assert first["id"] == fact and first["redact_error"].startswith("the turn log was not redacted")
    # The fact is gone, but its forgetting is not finished: forgetting it
    # again, by its text, finishes it rather than saying no fact matches.
    again = _forget(daemon, "Spare key of round 0")
    assert again["id"] == fact and again["redact_error"].startswith("the turn log was not redacted")
    assert daemon.cli_json("memory", "list", "--json")["facts"] == []
    daemon.terminate()
    _unreadable_turn(home, present=False)
    daemon = daemons.start(home)  # finishes it at start
    wait_for(lambda: _turns_holding(home, text) == 0, what="the forgetting finished at start")
    wait_for(lambda: not _read(home, FORGETTING), what="the intent deleted once finished")
    stone = f"[forgotten memory {fact}]".encode()
    assert all(stone in raw for raw in _read(home, TURNS).values())
    # Finished, a forgetting leaves nothing behind to forget.
    done = daemon.cli("memory", "forget", fact, "--json")
    assert done.returncode == 2 and orjson.loads(done.stdout)["status"] == "not_found"


_BOAT = "the owner's boat is named Aurora"


@pytest.fixture
def server() -> ModelServer:
    with ModelServer() as running:
        yield running  # type: ignore[misc]


def _send(daemon: Daemon, text: str) -> str:
    result = daemon.cli("send", "--json", text, timeout=90)
    assert result.returncode == 0, (result, daemon.log_text())
    reply: str = orjson.loads(result.stdout)["reply"]
    return reply


def test_after_a_forget_the_openai_runtime_is_not_sent_the_text_again(daemons: DaemonFactory,
                                                                        server: ModelServer) -> None:
    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
                                "ENACT_OPENAI_MODEL": "llama-test"})
    fact = _remember(daemon, _BOAT)
    server.script(Reply("first answer"), Reply("second answer"), Reply("third answer"))
    _send(daemon, "the first question")
    _send(daemon, "the second question")
    assert all(b"boat is named Aurora" in sent.body for sent in server.model_requests())
    forgot = daemon.cli("memory", "forget", fact)  # no --redact: what is sent loses it all the same
    assert forgot.returncode == 0, forgot
    assert forgot.stdout.strip() == (f"forgot 1 fact ({fact}); redacted 1 histories, not the turn log "
                                     "(use --redact); reset 0 sessions")
    assert _send(daemon, "the third question") == "third answer"
    third = server.model_requests()[-1]
    assert b"Aurora" not in third.body
    messages = third.json()["messages"]
    # The same session goes on, its history kept, the text in it a tombstone.
    assert [m["content"] for m in messages[1:4:2]] == ["first answer", "second answer"]
    assert f"[forgotten memory {fact}]" in messages[0]["content"] and "You are enact" in messages[0]["content"]


def test_after_a_forget_a_claude_session_given_the_fact_is_not_resumed(daemons: DaemonFactory,
                                                                       server: ModelServer) -> None:
    home = daemons.new_home()
    env = {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
           **claude_env(home.parent / "claude-home", server.url)}
    daemon = daemons.start(home, env=env)
    fact = _remember(daemon, _BOAT)
    server.script(Reply("first answer"), Reply("second answer"), Reply("fresh answer"))
    _send(daemon, "the first question")
    _send(daemon, "the second question")
    resumed = server.model_requests()[1].body
    assert b"boat is named Aurora" in resumed and b"the first question" in resumed
    forgot = daemon.cli_json("memory", "forget", fact, "--json")
    assert (forgot["sessions_reset"], forgot["histories_redacted"], forgot["redact_error"]) == (1, 0, "")
    assert _send(daemon, "the third question") == "fresh answer"
    # A new session: a fresh startup context, without the fact, and nothing of the old one.
    fresh = server.model_requests()[-1].body
    assert b"You are enact" in fresh and b"the third question" in fresh
    assert b"Aurora" not in fresh and b"the first question" not in fresh


def _forget_during_the_first_call(daemon: Daemon, server: ModelServer, fact: str) -> dict[str, Any]:
    """Forget ``fact`` while the first turn's call, given it, is running
    (the model answers it 3 s late); returns the forget's reply."""
    first = subprocess.Popen([sys.executable, "-m", "enact", "send", "--json", "the first question"],
                             env=enact_env(daemon.home), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    wait_for(lambda: len(server.model_requests()) == 1, what="the first call")
    assert b"boat is named Aurora" in server.model_requests()[0].body
    forgot: dict[str, Any] = daemon.cli_json("memory", "forget", fact, "--json")
    out, _ = first.communicate(timeout=90)
    assert orjson.loads(out)["reply"] == "first answer"
    return forgot


def test_a_fact_forgotten_during_an_openai_call_is_not_kept_from_it(daemons: DaemonFactory,
                                                                    server: ModelServer) -> None:
    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
                                "ENACT_OPENAI_MODEL": "llama-test"})
    fact = _remember(daemon, _BOAT)
    server.script(Reply("first answer", delay_s=3), Reply("second answer"))
    forgot = _forget_during_the_first_call(daemon, server, fact)
    assert (forgot["histories_redacted"], forgot["sessions_reset"]) == (0, 0)  # nothing kept yet
    assert _send(daemon, "the second question") == "second answer"
    second = server.model_requests()[-1].json()["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]  # the session went on
    assert "Aurora" not in orjson.dumps(second).decode() and f"[forgotten memory {fact}]" in second[0]["content"]


def test_a_claude_session_started_by_a_call_running_during_a_forget_is_not_kept(daemons: DaemonFactory,
                                                                                server: ModelServer) -> None:
    home = daemons.new_home()
    env = {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
           **claude_env(home.parent / "claude-home", server.url)}
    daemon = daemons.start(home, env=env)
    fact = _remember(daemon, _BOAT)
    server.script(Reply("first answer", delay_s=3), Reply("fresh answer"))
    _forget_during_the_first_call(daemon, server, fact)
    assert _send(daemon, "the second question") == "fresh answer"
    fresh = server.model_requests()[-1].body
    assert b"You are enact" in fresh and b"Aurora" not in fresh and b"the first question" not in fresh
