"""The Telegram channel alone, against the fake Bot API on loopback, for the
orderings a running daemon cannot be made to show on cue: the inbox is a
stand-in function that answers the channel's asks (accepting every event in
flight, finishing one before ``submit`` returns when told to) and the tests
acknowledge events themselves."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from telegram_server import FakeBotApi

from enact.channels import InboxInlet, OutgoingReply
from enact.channels.telegram import TelegramChannel
from enact.channels.telegram_api import BotApi
from enact.messages.common import chat_origin
from enact.messages.inbox import Accepted, ChatEvent, Cursor, GetCursor, Outcome, Receive
from enact.retry import Backoff

from conftest import wait_for

TOKEN = "7000001:AAH-channel-test-token"
OWNER, OTHER = 4242, 4343


@pytest.fixture
def bot() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


def reply_to(event: ChatEvent) -> OutgoingReply:
    return OutgoingReply(event_id=event.event_id, channel="telegram", conversation=event.conversation,
                         message_id=event.message_id, text="done", attempt=1)


def done(event: ChatEvent) -> Outcome:
    return Outcome(event_id=event.event_id, status="replied", duplicate=False, reply="done", actions=(), attempts=1)


def started(channel: TelegramChannel, on_receive: Callable[[ChatEvent], None] = lambda _: None) -> TelegramChannel:
    """``channel`` started on a stand-in inbox that accepts every new event
    in flight, after running ``on_receive`` on it (and a redelivered one as
    a duplicate, as the inbox's receipts do)."""
    seen: set[str] = set()

    def ask_inbox(actor: str, request: Any) -> Any:
        assert actor == "inbox"
        if isinstance(request, GetCursor):
            return Cursor(channel="telegram", cursor=0)
        if isinstance(request, Receive):
            event = request.event
            if event.event_id in seen:
                return Accepted(event_id=event.event_id, duplicate=True, in_flight=False)
            seen.add(event.event_id)
            on_receive(event)
            return Accepted(event_id=event.event_id, duplicate=False, in_flight=True)
        raise AssertionError(f"unexpected ask {request!r}")

    channel.start(InboxInlet("telegram", ask_inbox, origin=chat_origin("telegram")))
    return channel


def typing_to(bot: FakeBotApi, chat: int) -> int:
    return sum(1 for call in bot.of("sendChatAction") if call.params.get("chat_id") == chat)


def test_a_turn_finished_before_the_inbox_answers_leaves_no_typing_indicator(bot: FakeBotApi,
                                                                             tmp_path: Path) -> None:
    channel: TelegramChannel = TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1,
                                               max_photo_bytes=1, typing_after_s=0.0)

    def quick_turn(event: ChatEvent) -> None:  # the reply and the end come before submit returns
        if event.conversation == str(OWNER):
            channel.deliver(reply_to(event))
            channel.finished(done(event))

    started(channel, quick_turn)
    try:
        bot.message(OWNER, "quick")
        bot.message(OTHER, "slow")  # still running: its indicator shows, after any of OWNER's would
        wait_for(lambda: typing_to(bot, OTHER) >= 1, what="the running turn's typing indicator")
        assert typing_to(bot, OWNER) == 0
        assert len(bot.sent(OWNER)) == 1
    finally:
        channel.stop()


class TypingHeldBack(BotApi):
    """The Bot API, but a ``sendChatAction`` waits at the door until
    ``release``: the indicator is picked and on its way, not there yet."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(url, token)
        self.typing_on_its_way = threading.Event()
        self.release = threading.Event()

    def call(self, method: str, params: dict[str, Any], *, timeout_s: float = 30.0) -> Any:
        if method == "sendChatAction":
            self.typing_on_its_way.set()
            self.release.wait(10)
        return super().call(method, params, timeout_s=timeout_s)


def test_a_typing_indicator_on_its_way_when_the_reply_goes_out_reaches_the_chat_before_the_reply(
        bot: FakeBotApi, tmp_path: Path) -> None:
    api = TypingHeldBack(bot.url, TOKEN)
    events: list[ChatEvent] = []
    channel = started(TelegramChannel(api, attachments=tmp_path, poll_timeout_s=1, max_photo_bytes=1,
                                      typing_after_s=0.0), events.append)
    try:
        bot.message(OWNER, "hello")
        assert api.typing_on_its_way.wait(10)
        delivering = threading.Thread(target=channel.deliver, args=(reply_to(events[0]),))
        delivering.start()
        delivering.join(timeout=1.0)  # room for a reply that does not wait to overtake the indicator
        api.release.set()
        delivering.join(timeout=10)
        assert [c.method for c in bot.calls if c.method != "getUpdates"] == ["sendChatAction", "sendMessage"]
    finally:
        api.release.set()
        channel.stop()


def test_polls_while_an_update_is_unfinished_back_off_and_its_acknowledgement_resumes_at_once(
        bot: FakeBotApi, tmp_path: Path) -> None:
    policy = Backoff(first_s=0.1, factor=2.0, max_s=3.2)
    channel = started(TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1,
                                      max_photo_bytes=1, typing_after_s=60.0, repoll=policy))
    try:
        update = bot.message(OWNER, "a long turn")
        wait_for(lambda: len(bot.of("getUpdates")) >= 7, what="six polls that bring only the update in hand")
        polls = [c.at for c in bot.of("getUpdates")]
        gaps = [later - earlier for earlier, later in itertools.pairwise(polls[1:])]
        for waits, gap in enumerate(gaps[:5], start=1):  # the first poll brought the update itself
            assert gap >= policy.delay(waits) - 0.01, (waits, gaps)
        assert bot.offsets[-1] == 0  # nothing confirmed while it runs
        channel.acknowledge(update["update_id"])
        # Well under the 3.2 s back-off, loose for a loaded machine.
        wait_for(lambda: bot.offsets[-1] == update["update_id"] + 1, timeout=2.5,
                 what="the next poll at once (the back-off was at 3.2 s)")
    finally:
        channel.stop()


def test_polls_while_an_update_is_unfinished_wait_no_longer_than_the_bound(bot: FakeBotApi,
                                                                           tmp_path: Path) -> None:
    policy = Backoff(first_s=0.05, factor=2.0, max_s=0.2)
    channel = started(TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1,
                                      max_photo_bytes=1, typing_after_s=60.0, repoll=policy))
    try:
        bot.message(OWNER, "a long turn")
        wait_for(lambda: len(bot.of("getUpdates")) >= 9, what="eight polls while the update is unfinished")
        polls = [c.at for c in bot.of("getUpdates")]
        later_gaps = [b - a for a, b in itertools.pairwise(polls[5:])]
        assert all(0.19 <= gap < 1.2 for gap in later_gaps), later_gaps
    finally:
        channel.stop()
