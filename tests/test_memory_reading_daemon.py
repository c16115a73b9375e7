"""Memory is the owner's, for reading too, through running daemons with the
Telegram channel (the fake Bot API) and the scripted runtime, whose
transcript is every model request: a conversation that is not the owner's
(an unlocked chat) is given no fact, no private identity and no listing, and
may hold only so many facts for the owner; the owner's CLI is the owner's,
whatever the conversation lock names."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from scripted_chats import requests_of, scripted_telegram_home, telegram_turn
from telegram_server import FakeBotApi
from test_telegram import ENV, OTHER, OWNER, TOKEN

from conftest import Daemon, DaemonFactory, wait_for

BANK = "The owner banks with Example Bank."
TEA = "The owner drinks oolong tea at four."
RULES = textwrap.dedent(r'''
    [[rule]]
    match = '\[MEMORY\](.+?)\[/MEMORY\]'
    reply = 'Noted. [MEMORY]\1[/MEMORY]'

    [[rule]]
    match = "what do you remember"
    action = "memory"
    then = "You asked: {receipt}"

    [[rule]]
    match = ".*"
    reply = "Hello."
''')


@pytest.fixture
def bot() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


def send(daemon: Daemon, text: str) -> dict[str, Any]:
    result = daemon.cli("send", "--json", text, env=ENV)
    assert result.returncode == 0, result
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    return outcome


def remember(daemon: Daemon, text: str) -> str:
    outcome = daemon.cli_json("memory", "remember", "--json", text, env=ENV)
    assert outcome["outcome"] == "saved", outcome
    return str(outcome["id"])


def install_identity(daemon: Daemon, home: Path) -> None:
    path = home.parent / "me.toml"
    path.write_text('name = "Ada Lovelace"\n')
    assert daemon.cli_json("identity", "install", "--json", str(path), env=ENV)["outcome"] == "installed"


def test_a_strangers_chat_is_told_nothing_of_memory_while_the_owners_cli_gets_it(daemons: DaemonFactory,
                                                                                  bot: FakeBotApi) -> None:
    home, transcript = scripted_telegram_home(daemons, bot, rules=RULES, lock=())
    daemon = daemons.start(home, env=ENV)
    remember(daemon, BANK)
    install_identity(daemon, home)
    # A new session: startup context.
    assert telegram_turn(bot, OTHER, "hello") == "Hello."
    # A fact remembered after the session started would come by recall.
    remember(daemon, TEA)
    telegram_turn(bot, OTHER, "what tea does the owner drink?")
    stranger = requests_of(transcript, f"telegram:{OTHER}")
    assert len(stranger) == 2 and stranger[1]["resumed"] == stranger[0]["session"]
    assert "Name: enact" in stranger[0]["prompt"]  # who the software is, which is no secret
    for request in stranger:
        assert "Example Bank" not in request["prompt"] and "oolong" not in request["prompt"]
        assert "Ada Lovelace" not in request["prompt"] and "Remembered facts" not in request["prompt"]
    # Its listing, asked by the person or by the model, holds no fact either.
    listed = telegram_turn(bot, OTHER, "/memory")
    assert listed == ("memory is the owner's, and this conversation is not the owner's; to make this chat the "
                      f'owner\'s, lock it to the owner: chat.allowed_conversations = ["telegram:{OTHER}"] '
                      "in config.toml")
    asked = telegram_turn(bot, OTHER, "what do you remember?")
    assert asked.startswith("You asked: memory is the owner's") and "Example Bank" not in asked
    assert all("Example Bank" not in request["prompt"] for request in requests_of(transcript, f"telegram:{OTHER}"))
    # The owner's CLI conversation gets all of it.
    send(daemon, "hello")
    send(daemon, "what tea does the owner drink?")
    remember(daemon, "The owner's bike is blue.")
    send(daemon, "which bike is the owner's?")
    owner = requests_of(transcript, "local:cli")
    assert BANK in owner[0]["prompt"] and TEA in owner[0]["prompt"] and "Name: Ada Lovelace" in owner[0]["prompt"]
    assert "The owner's bike is blue." in owner[2]["prompt"] and "may bear on this message" in owner[2]["prompt"]
    assert BANK in send(daemon, "/memory")["reply"]


def test_a_strangers_marker_learns_nothing_of_memory_from_its_notice(daemons: DaemonFactory,
                                                                      bot: FakeBotApi) -> None:
    home, _ = scripted_telegram_home(daemons, bot, rules=RULES, lock=())
    daemon = daemons.start(home, env=ENV)
    known = remember(daemon, BANK)
    new = telegram_turn(bot, OTHER, "[MEMORY]The owner's cat is called Tom.[/MEMORY]")
    probe = telegram_turn(bot, OTHER, f"[MEMORY]{BANK}[/MEMORY]")
    assert new == probe == "Noted.\n\n(memory: held for the owner, whose memory it is)"
    assert known not in probe


def test_a_strangers_marker_never_changes_an_active_fact(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home, _ = scripted_telegram_home(daemons, bot, rules=RULES, lock=())
    daemon = daemons.start(home, env=ENV)
    known = remember(daemon, BANK)
    before = daemon.cli_json("memory", "show", "--json", known, env=ENV)
    # The same text, in other case and spacing: memory's key for it is the same.
    probe = telegram_turn(bot, OTHER, "[MEMORY]the owner  banks with example bank.[/MEMORY]")
    assert probe == "Noted.\n\n(memory: held for the owner, whose memory it is)"
    after = daemon.cli_json("memory", "show", "--json", known, env=ENV)
    # Its tags, refs, updated time (which ranking reads) and history are the owner's alone.
    assert after == before, (before, after)
    # Dropped as a duplicate: nothing is held for the owner either, and the
    # stranger's bound is not spent on it.
    assert daemon.cli_json("memory", "list", "--json", "--pending", env=ENV)["facts"] == []
    # A text memory did not have is still held, as before.
    telegram_turn(bot, OTHER, "[MEMORY]The owner's cat is called Tom.[/MEMORY]")
    pending = daemon.cli_json("memory", "list", "--json", "--pending", env=ENV)["facts"]
    assert [f["text"] for f in pending] == ["The owner's cat is called Tom."]


def test_a_write_to_hold_leaves_an_active_fact_as_it_was_whoever_sends_it(daemons: DaemonFactory,
                                                                          bot: FakeBotApi) -> None:
    """The rule at the Memory actor: any write it is asked to hold (here the
    CLI's own ``Remember`` with a reason to hold) is dropped as a duplicate of
    an active fact, and says so; without a reason it merges, as before."""
    home, _ = scripted_telegram_home(daemons, bot, rules=RULES, lock=())
    daemon = daemons.start(home, env=ENV)
    known = remember(daemon, BANK)
    before = daemon.cli_json("memory", "show", "--json", known, env=ENV)
    held = {"text": BANK, "hold": "a test's reason", "tags": ["probe"], "refs": ["probe-event"]}
    reply = daemon.cli_json("call", "memory.Remember", orjson.dumps(held).decode(), env=ENV)
    assert reply == {"type": "memory.Merged", "body": {"id": known, "unchanged": True}}, reply
    assert daemon.cli_json("memory", "show", "--json", known, env=ENV) == before
    merged = daemon.cli_json("memory", "remember", "--json", BANK, env=ENV)
    assert merged["outcome"] == "merged" and merged["id"] == known


def test_a_telegram_only_lock_leaves_the_owners_cli_answered(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home, transcript = scripted_telegram_home(daemons, bot, rules=RULES, lock=(OWNER,))
    daemon = daemons.start(home, env=ENV)
    remember(daemon, BANK)
    result = daemon.cli("send", "hi", env=ENV)
    assert result.returncode == 0 and result.stdout.strip() == "Hello.", result
    assert BANK in requests_of(transcript, "local:cli")[0]["prompt"]
    # The lock still keeps other chats out, and its own chat is the owner's.
    assert telegram_turn(bot, OWNER, "/memory").endswith(BANK)
    stranger = bot.message(OTHER, "hello")
    wait_for(lambda: bot.confirmed > stranger["update_id"], what="the stranger's update to be passed over")
    assert bot.sent(OTHER) == [] and requests_of(transcript, f"telegram:{OTHER}") == []
    # The CLI is the owner's as a channel: a Telegram chat's event handed in
    # through the control socket is still that chat's, outside the lock.
    event = {"channel": "telegram", "conversation": str(OTHER), "message_id": "handed-in", "text": "hello"}
    handed = daemon.cli_json("call", "inbox.Receive", orjson.dumps({"event": event}).decode(), env=ENV)
    assert handed["type"] == "inbox.Ignored"


def test_a_conversation_not_the_owners_may_hold_only_so_many_facts_for_the_owner(daemons: DaemonFactory,
                                                                                 bot: FakeBotApi) -> None:
    home, _ = scripted_telegram_home(daemons, bot, rules=RULES, lock=(),
                                     config="\n[memory]\nmax_pending_per_conversation = 2\n")
    daemon = daemons.start(home, env=ENV)
    held = "Noted.\n\n(memory: held for the owner, whose memory it is)"
    assert telegram_turn(bot, OTHER, "[MEMORY]The owner likes jazz.[/MEMORY]") == held
    assert telegram_turn(bot, OTHER, "[MEMORY]The owner likes chess.[/MEMORY]") == held
    refused = telegram_turn(bot, OTHER, "[MEMORY]The owner likes golf.[/MEMORY]")
    assert refused == ("Noted.\n\n(memory: not saved, this conversation already has 2 facts held for the owner, "
                       "the most one that is not the owner's may have (memory.max_pending_per_conversation))")
    pending = daemon.cli_json("memory", "list", "--json", "--pending", env=ENV)["facts"]
    assert sorted(f["text"] for f in pending) == ["The owner likes chess.", "The owner likes jazz."]
    assert all(f["tags"] == [f"from-telegram-{OTHER}"] for f in pending)
    # Another conversation has its own bound.
    assert telegram_turn(bot, OWNER, "[MEMORY]The owner likes golf.[/MEMORY]") == held
    # Once the owner confirms one, there is room again.
    assert daemon.cli("memory", "confirm", pending[0]["id"], env=ENV).returncode == 0
    assert telegram_turn(bot, OTHER, "[MEMORY]The owner likes tennis.[/MEMORY]") == held
