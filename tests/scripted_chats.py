"""Telegram homes whose model is the scripted runtime with a transcript of
every call: what the model was told in each conversation can be read back
(the memory and authority tests' shared set-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from telegram_server import FakeBotApi
from test_telegram import telegram_home

from conftest import DaemonFactory, wait_for


def scripted_telegram_home(daemons: DaemonFactory, bot: FakeBotApi, *, lock: tuple[int, ...], rules: str,
                           commands: str = "", config: str = "") -> tuple[Path, Path]:
    """A Telegram home locked to the chats ``lock`` (none: no lock; the local
    CLI is the owner's either way) with the scripted ``rules`` (and
    ``commands.toml``, extra ``config``), and where its transcript goes."""
    home = telegram_home(daemons, bot, lock=lock)
    (home / "scripted.toml").write_text(rules)
    if commands:
        (home / "commands.toml").write_text(commands)
    transcript = home.parent / "transcript.jsonl"
    path = home / "config.toml"
    path.write_text(path.read_text() + f'\n[scripted]\ntranscript = "{transcript}"\n{config}')
    return home, transcript


def telegram_turn(bot: FakeBotApi, chat: int, text: str) -> str:
    """Send ``text`` from ``chat`` and wait for the reply."""
    before = len(bot.sent(chat))
    bot.message(chat, text)
    wait_for(lambda: len(bot.sent(chat)) > before, what=f"the reply to {text!r}")
    return str(bot.sent(chat)[-1]["text"])


def requests_of(transcript: Path, session_key: str) -> list[dict[str, Any]]:
    """The scripted runtime's calls for one session, oldest first."""
    calls = [orjson.loads(line) for line in transcript.read_text().splitlines()]
    return [call for call in calls if call["session_key"] == session_key]
