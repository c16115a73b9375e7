"""The owner's work is the owner's, for reading too, through running daemons
with the Telegram channel (the fake Bot API) and the scripted runtime: a chat
that is not the owner's (no lock names it) is told in one line that a
command's output is the owner's and how to lock the chat, whether a person
types the command or the model asks for it as an action; only ``/help`` and
``/status`` answer it. Its model is told the message is not the owner's."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from scripted_chats import requests_of, scripted_telegram_home, telegram_turn
from telegram_server import FakeBotApi
from test_telegram import ENV, OTHER, OWNER, TOKEN

from conftest import DaemonFactory

RULES = textwrap.dedent(r'''
    [[rule]]
    match = "what are you working on"
    action = "task.list"
    then = "Tasks: {receipt}"

    [[rule]]
    match = ".*"
    reply = "Hello."
''')

READS = ("/task.list", "/task.show 1", "/review.list", "/review.show 1", "/evolve.candidates",
         "/evolve.show cand-0123456789ab", "/backlog.list", "/cron.list", "/memory")


@pytest.fixture
def bot() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


def refusal(what: str) -> str:
    return (f"{what} is the owner's, and this conversation is not the owner's; to make this chat the owner's, "
            f'lock it to the owner: chat.allowed_conversations = ["telegram:{OTHER}"] in config.toml')


def test_a_strangers_chat_reads_nothing_of_the_owners_work(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home, transcript = scripted_telegram_home(daemons, bot, rules=RULES, lock=())
    daemon = daemons.start(home, env=ENV)
    assert daemon.cli_json("backlog", "add", "--json", "rotate the Example Bank keys", env=ENV)
    for typed in READS:
        name = typed.split()[0].removeprefix("/")
        what = "memory" if name == "memory" else f"what {name} shows"
        assert telegram_turn(bot, OTHER, typed) == refusal(what), typed
    # The model's action in the stranger's conversation meets the same rule.
    asked = telegram_turn(bot, OTHER, "what are you working on?")
    assert asked == f"Tasks: {refusal('what task.list shows')}"
    # What is harmless answers anyone: the command list and that the daemon is up.
    assert "/task.list" in telegram_turn(bot, OTHER, "/help")
    assert telegram_turn(bot, OTHER, "/status").startswith("enact ")
    # Its model is told honestly whose message it is.
    first = requests_of(transcript, f"telegram:{OTHER}")[0]["prompt"]
    assert f"Message from a chat that is not the owner's (telegram, conversation {OTHER}):" in first
    assert "Owner message" not in first
    for sent in bot.sent(OTHER):
        assert "Example Bank" not in str(sent["text"])


def test_the_owners_locked_chat_reads_the_owners_work(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home, transcript = scripted_telegram_home(daemons, bot, rules=RULES, lock=(OWNER,))
    daemon = daemons.start(home, env=ENV)
    assert daemon.cli_json("backlog", "add", "--json", "rotate the Example Bank keys", env=ENV)
    assert "rotate the Example Bank keys" in telegram_turn(bot, OWNER, "/backlog.list")
    assert "is the owner's, and this conversation" not in telegram_turn(bot, OWNER, "/task.list")
    assert "is the owner's, and this conversation" not in telegram_turn(bot, OWNER, "what are you working on?")
    first = requests_of(transcript, f"telegram:{OWNER}")[0]["prompt"]
    assert f"Owner message (telegram, conversation {OWNER}):" in first
    assert "Message from a chat that is not the owner's" not in first
