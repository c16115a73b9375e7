"""The Telegram channel through running daemons, against the fake Bot API
(tests/telegram_server.py) on the loopback address."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from telegram_server import FakeBotApi
from test_chat import RULES, commands_toml, runs

from enact.channels import OutgoingReply
from enact.channels.telegram import REPEAT_MARK, TelegramChannel
from enact.channels.telegram_api import BotApi
from enact.channels.telegram_text import MAX_MESSAGE
from enact.chat.parts import split_reply

from conftest import Daemon, DaemonFactory, run_cli, wait_for

TOKEN = "7000001:AAH-secret-test-token-do-not-leak"
OWNER = 4242
OTHER = 5151
ENV = {"ENACT_TELEGRAM_TOKEN": TOKEN}
LONG = "\n\n".join(f"Paragraph {n}. " + "word " * 180 + "end." for n in range(12))
EXTRA_RULES = f'''
[[rule]]
match = "long answer"
reply = """{LONG}"""

[[rule]]
match = "in bold"
reply = "<b>bold</b> &amp; <i>fine</i>"

[[rule]]
match = "in markdown"
reply = "*not* <html> & _sure_"
'''


@pytest.fixture
def bot() -> Iterator[FakeBotApi]:
    with FakeBotApi(TOKEN) as server:
        yield server


def telegram_home(daemons: DaemonFactory, bot: FakeBotApi, config: str = "", *, sleep: str = "sleep 60",
                  lock: tuple[int, ...] = (OWNER, OTHER)) -> Path:
    """A home whose Telegram channel polls ``bot``, locked to the chats
    ``lock`` (effects from an unlocked Telegram chat are refused)."""
    home = daemons.new_home()
    (home / "scripted.toml").write_text(RULES + EXTRA_RULES)
    (home / "commands.toml").write_text(commands_toml(home.parent / "runs.txt").replace("sleep 60", sleep))
    allowed = orjson.dumps([f"telegram:{chat}" for chat in lock]).decode()
    (home / "config.toml").write_text(
        f'[chat]\nallowed_conversations = {allowed}\n\n'
        f'[channels.telegram]\nenabled = true\napi_base = "{bot.url}"\npoll_timeout_s = 2\n{config}'
    )
    return home


def record_runtime_calls(home: Path) -> Path:
    """The scripted runtime's transcript: every request it gets, images included."""
    transcript = home.parent / "transcript.jsonl"
    config = home / "config.toml"
    config.write_text(config.read_text() + f'\n[scripted]\ntranscript = "{transcript}"\n')
    return transcript


def start(daemons: DaemonFactory, home: Path) -> Daemon:
    return daemons.start(home, env=ENV)


def answered(bot: FakeBotApi, chat: int, count: int = 1) -> bool:
    return len(bot.sent(chat)) >= count


def metrics_text(daemon: Daemon) -> str:
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    return str(urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode())


def telegram_state(daemon: Daemon) -> dict[str, Any]:
    channels = daemon.cli_json("channel", "list", "--json", env=ENV)
    return next(c for c in channels if c["name"] == "telegram")


def test_text_message_is_answered_with_reply_to_set(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    update = bot.message(OWNER, "hello there", reply_to="an earlier note")
    wait_for(lambda: answered(bot, OWNER), what="the reply")
    [sent] = bot.sent(OWNER)
    assert sent["reply_to_message_id"] == update["message"]["message_id"]
    assert sent["text"] == "(scripted runtime) You said: hello there"
    assert "parse_mode" not in sent
    [turn] = daemon.cli_json("turns", "--json")
    assert turn["channel"] == "telegram" and turn["conversation"] == str(OWNER)
    wait_for(lambda: bot.confirmed == update["update_id"] + 1, what="the offset to pass the finished update")
    assert telegram_state(daemon)["cursor"] == update["update_id"]


def test_update_without_text_or_photo_is_acknowledged_and_dropped(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot, lock=(OWNER, -100200)))
    sticker = bot.update({"message": {"message_id": 55, "date": 0, "chat": {"id": OWNER, "type": "private"},
                                      "from": {"id": OWNER}, "sticker": {"file_id": "s"}}})
    wait_for(lambda: bot.confirmed > sticker["update_id"], what="the offset to pass the dropped update")
    assert bot.sent(OWNER) == []
    assert f"update {sticker['update_id']} dropped: no text, caption or photo" in daemon.log_text()
    topic = bot.message(-100200, "in a topic", thread=7)
    wait_for(lambda: answered(bot, -100200), what="the reply in the topic")
    assert bot.sent(-100200)[0]["reply_to_message_id"] == topic["message"]["message_id"]


def test_redelivered_update_is_answered_once(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    update = bot.message(OWNER, "touch it")
    wait_for(lambda: answered(bot, OWNER), what="the reply")
    bot.redeliver(update)
    later = bot.message(OWNER, "hello after")
    wait_for(lambda: answered(bot, OWNER, 2), what="the later reply")
    wait_for(lambda: bot.confirmed > later["update_id"], what="the offset to pass both")
    assert [s["text"][:9] for s in bot.sent(OWNER)] == ["Touched: ", "(scripted"]
    assert runs(daemon.home) == 1
    assert telegram_state(daemon)["cursor"] == later["update_id"]


def test_update_in_processing_at_kill_9_is_redelivered_and_answered_once(daemons: DaemonFactory,
                                                                          bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    daemon = start(daemons, home)
    slow = bot.message(OWNER, "do the slow thing")
    wait_for(lambda: runs(home) == 1, what="the slow action to start")
    quick = bot.message(OTHER, "hello")
    wait_for(lambda: answered(bot, OTHER), what="the later update's reply")
    assert bot.confirmed <= slow["update_id"]  # never past the update still in processing
    daemon.kill9()
    restarted = start(daemons, home)
    wait_for(lambda: answered(bot, OWNER), what="the interrupted update's reply")
    wait_for(lambda: bot.confirmed > quick["update_id"], what="the offset to pass both updates")
    [reply] = bot.sent(OWNER)
    assert "not repeated" in reply["text"]
    assert reply["reply_to_message_id"] == slow["message"]["message_id"]
    assert len(bot.sent(OTHER)) == 1  # finished before the crash: not answered again
    assert runs(home) == 1
    assert {t["message_id"] for t in restarted.cli_json("turns", "--json")} == {
        str(slow["message"]["message_id"]), str(quick["message"]["message_id"])}


def test_failing_earlier_update_never_lets_the_offset_pass_it(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    start(daemons, telegram_home(daemons, bot))
    failing = bot.message(OWNER, "explode")
    later = bot.message(OTHER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the diagnostic reply after the last attempt")
    wait_for(lambda: bot.confirmed > later["update_id"], what="the offset to pass both once both finished")
    calls = list(bot.calls)
    diagnostic_at = next(i for i, c in enumerate(calls) if c.method == "sendMessage" and c.params["chat_id"] == OWNER)
    later_at = next(i for i, c in enumerate(calls) if c.method == "sendMessage" and c.params["chat_id"] == OTHER)
    assert later_at < diagnostic_at  # the later update finished first
    offsets_before = [c.params.get("offset", 0) for c in calls[:diagnostic_at] if c.method == "getUpdates"]
    assert offsets_before and max(offsets_before) <= failing["update_id"]
    assert "after 3 attempts" in bot.sent(OWNER)[0]["text"]


def test_long_reply_is_split_into_numbered_parts(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    start(daemons, telegram_home(daemons, bot))
    update = bot.message(OWNER, "long answer please")
    wait_for(lambda: bot.confirmed > update["update_id"], what="the event to finish")
    parts = [s["text"] for s in bot.sent(OWNER)]
    assert len(parts) == 3
    assert all(len(p) <= 4096 for p in parts)
    assert [p.split("\n", 1)[0] for p in parts] == ["(1/3)", "(2/3)", "(3/3)"]
    assert "\n\n".join(p.split("\n", 1)[1] for p in parts) == LONG  # cut on paragraph breaks only
    assert [("reply_to_message_id" in s) for s in bot.sent(OWNER)] == [True, False, False]


def test_kill_9_between_parts_sends_each_part_once_and_reports_the_unknown_one(daemons: DaemonFactory,
                                                                                bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    daemon = start(daemons, home)
    bot.stall("sendMessage", call=2, seconds=60)  # part 2 reaches the chat; its answer never reaches enact
    update = bot.message(OWNER, "long answer please")
    wait_for(lambda: len(bot.of("sendMessage")) == 2, what="part 2 to be sent")
    daemon.kill9()
    restarted = start(daemons, home)
    wait_for(lambda: bot.confirmed > update["update_id"], what="the event to finish after the restart")
    sent = bot.sent(OWNER)
    assert [s["text"].split("\n", 1)[0] for s in sent] == ["(1/3)", "(2/3)", "(3/3)"]  # each once
    assert [("reply_to_message_id" in s) for s in sent] == [True, False, False]
    [turn] = restarted.cli_json("turns", "--json")
    assert turn["outcome"] == "delivery_uncertain"
    assert turn["error"].startswith("part 2 of 3: the daemon stopped while it was being delivered")
    assert "the other parts were delivered" in turn["error"]
    listed = restarted.cli("turns").stdout
    assert "[delivery_uncertain]" in listed and "! part 2 of 3: the daemon stopped" in listed
    assert "part 2 of 3) was being delivered when the daemon stopped" in restarted.log_text()


def test_send_cut_after_its_request_was_written_is_sent_once_more_marked_as_a_possible_repeat(
        daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    bot.cut("sendMessage", call=1)  # it reaches the chat; enact never hears back
    update = bot.message(OWNER, "hello")
    wait_for(lambda: bot.confirmed > update["update_id"], what="the event to finish")
    first, again = bot.sent(OWNER)
    assert not first["text"].startswith(REPEAT_MARK)
    assert again["text"] == REPEAT_MARK + first["text"]
    assert again["reply_to_message_id"] == first["reply_to_message_id"]
    [turn] = daemon.cli_json("turns", "--json")
    assert turn["outcome"] == "replied"
    assert "after the request was sent" in daemon.log_text()


def test_send_cut_twice_after_its_request_was_written_is_not_sent_a_third_time(daemons: DaemonFactory,
                                                                               bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    bot.cut("sendMessage", call=1)
    bot.cut("sendMessage", call=2)
    update = bot.message(OWNER, "hello")
    wait_for(lambda: bot.confirmed > update["update_id"], what="the event to finish")
    assert [s["text"].startswith(REPEAT_MARK) for s in bot.sent(OWNER)] == [False, True]
    [turn] = daemon.cli_json("turns", "--json")
    assert turn["outcome"] == "delivery_uncertain" and "not sent a third time" in turn["error"]
    assert 'enact_inbox_deliveries_total{channel="telegram",outcome="not_resent"} 1.0' in metrics_text(daemon)


def reply_to(chat: int) -> OutgoingReply:
    return OutgoingReply(event_id="telegram:1", channel="telegram", conversation=str(chat), message_id="5",
                         text="hi", attempt=1)


def test_only_a_send_whose_request_went_out_whole_is_reported_unsure(bot: FakeBotApi, tmp_path: Path) -> None:
    with FakeBotApi(TOKEN) as gone:
        nobody_listens = gone.url
    refused = TelegramChannel(BotApi(nobody_listens, TOKEN), attachments=tmp_path, poll_timeout_s=1,
                              max_photo_bytes=1).deliver(reply_to(OWNER))
    assert (refused.ok, refused.retryable, refused.unsure) == (False, True, False)
    assert "before the request was sent" in refused.error
    bot.cut("sendMessage", call=1)
    lost = TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1,
                           max_photo_bytes=1).deliver(reply_to(OWNER))
    assert (lost.ok, lost.retryable, lost.unsure) == (False, True, True)
    assert "after the request was sent" in lost.error and TOKEN not in lost.error


def repeat_of(text: str) -> OutgoingReply:
    return OutgoingReply(event_id="telegram:1", channel="telegram", conversation=str(OWNER), message_id="5",
                         text=text, attempt=2, repeat=True)


def test_a_reply_of_telegrams_full_limit_goes_out_as_one_part() -> None:
    # The outbox cuts a stored reply again at each attempt: a smaller limit
    # would cut replies stored by an earlier daemon at other points.
    assert split_reply("x" * MAX_MESSAGE, TelegramChannel.max_message_length) == ["x" * MAX_MESSAGE]


def test_a_repeated_part_with_room_for_the_mark_goes_out_as_one_message_headed_by_it(bot: FakeBotApi,
                                                                                      tmp_path: Path) -> None:
    text = "x" * (MAX_MESSAGE - len(REPEAT_MARK))
    channel = TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1, max_photo_bytes=1)
    assert channel.deliver(repeat_of(text)).ok
    assert [s["text"] for s in bot.sent(OWNER)] == [REPEAT_MARK + text]


def test_a_repeated_part_near_the_limit_goes_out_whole_after_the_mark_sent_on_its_own(bot: FakeBotApi,
                                                                                     tmp_path: Path) -> None:
    [part, _] = split_reply("word " * 1000, MAX_MESSAGE)
    assert MAX_MESSAGE - len(REPEAT_MARK) < len(part) <= MAX_MESSAGE
    channel = TelegramChannel(BotApi(bot.url, TOKEN), attachments=tmp_path, poll_timeout_s=1, max_photo_bytes=1)
    assert channel.deliver(repeat_of(part)).ok
    mark, sent = bot.sent(OWNER)
    assert mark["text"] == REPEAT_MARK.rstrip() and "reply_to_message_id" not in mark
    assert sent["text"] == part and sent["reply_to_message_id"] == 5


def test_rate_limit_is_honoured(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    bot.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the reply after the wait")
    limited, delivered = bot.of("sendMessage")
    assert limited.answer["error_code"] == 429
    assert delivered.at - limited.at >= 1.0
    assert len(bot.sent(OWNER)) == 1
    text = metrics_text(daemon)
    assert 'enact_channel_delivery_errors_total{channel="telegram",reason="rate_limited"} 1.0' in text


def test_rate_limit_over_a_minute_is_left_to_the_outbox_which_waits_as_asked(daemons: DaemonFactory,
                                                                               bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))  # the outbox's own back-off starts at 0.5 s
    bot.fail_next("sendMessage", 429, "Too Many Requests: retry after 90", retry_after=90)
    bot.message(OWNER, "hello")
    wait_for(lambda: "trying again in 90 s" in daemon.log_text(), what="the outbox to schedule the retry")
    [limited] = bot.of("sendMessage")
    bot.message(OTHER, "hello")
    wait_for(lambda: answered(bot, OTHER), what="a later reply, while the first one waits")
    # Three times the outbox's own first back-off: nothing more is sent to the rate-limited chat.
    wait_for(lambda: time.monotonic() - limited.at > 1.5, what="the outbox's own back-off to pass")
    assert bot.sent(OWNER) == [] and len([c for c in bot.of("sendMessage") if c.params["chat_id"] == OWNER]) == 1
    turns = daemon.cli_json("turns", "--json")
    assert [t["conversation"] for t in turns] == [str(OTHER)]  # the first is still waiting to be delivered


def test_blocked_bot_is_reported_in_status_and_metrics(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot))
    bot.block(OWNER)
    bot.message(OWNER, "hello")
    wait_for(lambda: any(t["outcome"] == "delivery_failed" for t in daemon.cli_json("turns", "--json")),
             what="the failed delivery to be logged")
    assert len(bot.of("sendMessage")) == 1  # terminal: not retried
    [channel] = [c for c in daemon.cli_json("status", "--json")["channels"] if c["name"] == "telegram"]
    assert channel["delivery_failures"] == 1
    assert "bot was blocked by the user" in channel["last_error"]
    assert 'enact_channel_delivery_errors_total{channel="telegram",reason="forbidden"} 1.0' in metrics_text(daemon)
    listed = daemon.cli("channel", "list")
    assert "blocked" in listed.stdout and listed.returncode == 0
    assert "telegram: up, 1 reply refused; last error: delivery to chat" in daemon.cli("status").stdout


def test_reply_valid_for_the_parse_mode_uses_it_and_any_other_is_plain_text(daemons: DaemonFactory,
                                                                             bot: FakeBotApi) -> None:
    start(daemons, telegram_home(daemons, bot, 'parse_mode = "HTML"\n'))
    bot.message(OWNER, "in bold")
    wait_for(lambda: answered(bot, OWNER), what="the HTML reply")
    bot.message(OWNER, "in markdown")
    wait_for(lambda: answered(bot, OWNER, 2), what="the plain reply")
    html, plain = bot.sent(OWNER)
    assert html["parse_mode"] == "HTML" and html["text"] == "<b>bold</b> &amp; <i>fine</i>"
    assert "parse_mode" not in plain and plain["text"] == "*not* <html> & _sure_"


def test_chat_outside_the_lock_gets_no_reply(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    daemon = start(daemons, telegram_home(daemons, bot, lock=(OWNER,)))
    stranger = bot.message(OTHER, "touch it")
    owner = bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the owner's reply")
    wait_for(lambda: bot.confirmed > owner["update_id"], what="the offset to pass both")
    assert bot.sent(OTHER) == []
    assert runs(daemon.home) == 0
    assert stranger["update_id"] < owner["update_id"]
    assert 'enact_inbox_events_total{channel="telegram",outcome="not_allowed"} 1.0' in metrics_text(daemon)


def test_photo_reaches_the_runtime_as_an_attachment(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    transcript = record_runtime_calls(home)
    start(daemons, home)
    content = b"\xff\xd8\xff" + os.urandom(4000)
    bot.message(OWNER, photo=content, caption="what is this")
    wait_for(lambda: answered(bot, OWNER), what="the reply")
    [call] = [orjson.loads(line) for line in transcript.read_bytes().splitlines()]
    [image] = call["images"]
    assert Path(image).read_bytes() == content  # the largest size, fetched into the home
    assert Path(image).is_relative_to(home)
    assert f"Attachments (metadata only): {Path(image).name}" in call["prompt"]
    assert "what is this" in call["prompt"]


def test_photo_over_the_size_cap_is_not_fetched(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot, "max_photo_bytes = 1000\n")
    transcript = record_runtime_calls(home)
    start(daemons, home)
    bot.message(OWNER, photo=os.urandom(8000), caption="big one")
    wait_for(lambda: answered(bot, OWNER), what="the reply")
    [call] = [orjson.loads(line) for line in transcript.read_bytes().splitlines()]
    assert call["images"] == []
    assert "not fetched" in call["prompt"]
    assert not (home / "attachments" / "telegram" / str(OWNER)).exists() or not any(
        (home / "attachments" / "telegram" / str(OWNER)).iterdir())


def test_photo_whose_fetch_keeps_failing_goes_on_without_it_after_three_polls(daemons: DaemonFactory,
                                                                               bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    transcript = record_runtime_calls(home)
    start(daemons, home)
    for _ in range(3):
        bot.fail_next("getFile", 502, "Bad Gateway")
    bot.message(OWNER, photo=b"\xff\xd8\xff" + os.urandom(100), caption="flaky")
    later = bot.message(OWNER, "and this")
    wait_for(lambda: answered(bot, OWNER, 2), timeout=60, what="both replies")
    calls = [orjson.loads(line) for line in transcript.read_bytes().splitlines()]
    flaky = next(call for call in calls if "flaky" in call["prompt"])
    assert flaky["images"] == [] and "not fetched" in flaky["prompt"]
    wait_for(lambda: bot.confirmed > later["update_id"], what="the offset to pass both")


def test_photo_telegram_refuses_to_hand_over_does_not_hold_up_the_chat(daemons: DaemonFactory,
                                                                        bot: FakeBotApi) -> None:
    start(daemons, telegram_home(daemons, bot))
    gone = {"file_id": "expired", "file_unique_id": "x", "file_size": 10, "width": 9, "height": 9}
    bot.update({"message": {"message_id": 77, "date": 0, "chat": {"id": OWNER, "type": "private"},
                            "from": {"id": OWNER}, "photo": [gone], "caption": "look"}})
    wait_for(lambda: answered(bot, OWNER), what="the reply without the photo")
    later = bot.message(OWNER, "and this")
    wait_for(lambda: answered(bot, OWNER, 2), what="the next reply")
    wait_for(lambda: bot.confirmed > later["update_id"], what="the offset to pass both")


def test_channel_check_says_whether_the_token_works(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    good = run_cli(home, "channel", "check", "telegram", env=ENV)
    assert good.returncode == 0, good.stderr
    assert "the token works: bot @enact_test_bot" in good.stdout
    bad = run_cli(home, "channel", "check", "telegram", "--json", env={"ENACT_TELEGRAM_TOKEN": "1:wrong-token"})
    assert bad.returncode == 1
    assert "the bot token was refused by Telegram" in orjson.loads(bad.stdout)["error"]
    assert "wrong-token" not in bad.stdout
    none = run_cli(home, "channel", "check", "telegram")
    assert none.returncode == 1 and "no bot token" in none.stderr


def test_token_file_readable_by_others_is_refused(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    token_file = home.parent / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    (home / "config.toml").write_text((home / "config.toml").read_text() + f'token_file = "{token_file}"\n')
    refused = run_cli(home, "daemon", "run", "--metrics-addr", "127.0.0.1:0")
    assert refused.returncode == 2
    assert "must be 0600" in refused.stderr and TOKEN not in refused.stderr
    token_file.chmod(0o600)
    daemon = daemons.start(home)
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the reply with the token from the file")
    assert daemon.cli("channel", "check", "telegram").returncode == 0


def test_config_show_says_the_token_is_read_from_the_token_file_never_what_it_holds(
    daemons: DaemonFactory, bot: FakeBotApi
) -> None:
    home = telegram_home(daemons, bot)
    token_file = home.parent / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    (home / "config.toml").write_text((home / "config.toml").read_text() + f'token_file = "{token_file}"\n')
    daemon = daemons.start(home)  # no ENACT_TELEGRAM_TOKEN: the file's token is the one that works
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the reply with the token from the file")
    shown = daemon.cli_json("config", "show", "--json")
    assert shown["from"] == "daemon"
    rows = {row["key"]: row for row in shown["settings"]}
    assert rows["channels.telegram.token"]["value"] == "from channels.telegram.token_file"
    assert rows["channels.telegram.token_file"]["value"] == str(token_file)
    plain = daemon.cli("config", "show").stdout
    [line] = [line for line in plain.splitlines() if line.startswith("channels.telegram.token ")]
    assert '"from channels.telegram.token_file"' in line
    assert TOKEN not in plain + orjson.dumps(shown).decode()


def test_token_is_absent_from_logs_config_status_and_metrics(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    (home / "config.toml").write_text((home / "config.toml").read_text() + '\n[daemon]\nlog_level = "debug"\n')
    bot.fail_next("getUpdates", 502, f"Bad Gateway at /bot{TOKEN}/getUpdates")
    daemon = start(daemons, home)
    bot.block(OTHER)
    bot.message(OTHER, "hello")
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the reply")
    wait_for(lambda: telegram_state(daemon)["delivery_failures"] == 1, what="the refused delivery")
    shown = run_cli(home, "config", "show", "--json", env=ENV)
    rows = {row["key"]: row for row in orjson.loads(shown.stdout)["settings"]}
    assert rows["channels.telegram.token"]["value"] == "set"
    outputs = [shown.stdout, run_cli(home, "config", "show", env=ENV).stdout, daemon.cli("status", "--json").stdout,
               daemon.cli("channel", "list", "--json").stdout, metrics_text(daemon), daemon.log_text()]
    assert "502 Bad Gateway at /bot<token>/getUpdates" in daemon.log_text()
    for output in outputs:
        assert TOKEN not in output
        assert TOKEN.split(":")[1] not in output
    daemon.terminate()
    state = (home / "state" / "data.mdb").read_bytes()
    assert TOKEN.encode() not in state


def test_poll_errors_back_off_and_never_stop_the_daemon(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    bot.fail_next("getUpdates", 500, "Internal Server Error")
    bot.fail_next("getUpdates", 500, "Internal Server Error")
    daemon = start(daemons, telegram_home(daemons, bot))
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the reply once polling works again")
    polls = bot.of("getUpdates")
    assert polls[1].at - polls[0].at >= 0.9 and polls[2].at - polls[1].at >= 1.9  # 1 s, then 2 s
    text = metrics_text(daemon)
    assert 'enact_channel_poll_errors_total{channel="telegram",reason="server_error"} 2.0' in text
    assert 'enact_channel_up{channel="telegram"} 1.0' in text
    assert telegram_state(daemon)["state"] == "up"


def test_typing_indicator_while_a_turn_runs_longer_than_two_seconds(daemons: DaemonFactory,
                                                                     bot: FakeBotApi) -> None:
    start(daemons, telegram_home(daemons, bot, sleep="sleep 3"))
    bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the quick reply")
    assert bot.of("sendChatAction") == []
    bot.message(OWNER, "do the slow thing")
    wait_for(lambda: answered(bot, OWNER, 2), what="the slow reply")
    [typing] = bot.of("sendChatAction")
    assert typing.params == {"chat_id": OWNER, "action": "typing"}


def test_channel_list_shows_every_channel(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    plain = daemons.start()
    listed = plain.cli_json("channel", "list", "--json")
    assert [(c["name"], c["state"]) for c in listed] == [("local", "up"), ("telegram", "disabled")]
    daemon = start(daemons, telegram_home(daemons, bot))
    wait_for(lambda: telegram_state(daemon)["state"] == "up", what="the first poll")
    human = daemon.cli("channel", "list")
    assert human.returncode == 0 and "telegram" in human.stdout and "up" in human.stdout


def test_fenced_daemon_stops_polling_at_once(daemons: DaemonFactory, bot: FakeBotApi) -> None:
    home = telegram_home(daemons, bot)
    old = start(daemons, home)
    wait_for(lambda: telegram_state(old)["state"] == "up", what="the first poll")
    new = daemons.start(home, "--takeover", env=ENV)
    assert old.wait_exit(10) == 0
    update = bot.message(OWNER, "hello")
    wait_for(lambda: answered(bot, OWNER), what="the new daemon's reply")
    wait_for(lambda: bot.confirmed > update["update_id"], what="the offset to pass it")
    assert len(bot.sent(OWNER)) == 1
    assert telegram_state(new)["state"] == "up"
