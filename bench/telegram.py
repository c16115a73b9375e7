"""The Telegram channel: events/s and latency beside the local channel.

One real ``enact daemon run`` process serves both channels in the same run,
with the scripted runtime (no rules file: every message gets its echo) on
real LMDB with durable commits. The Telegram channel long-polls the fake Bot
API of the tests (``tests/telegram_server.py``) on the loopback address.

Local: one thread per conversation sends ``local.Send`` over the control
socket and waits for the outcome, then sends the next. Telegram: one thread
per chat posts a message to the fake server (as a user would) and waits for
the bot's ``sendMessage`` to that chat, then posts the next; so one event is
getUpdates → receipt → conversation → reply → sendMessage, plus the next
acknowledgement. Latency is from the post to the reply, per event.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench._daemons import start_daemon, stop_daemon
from bench._table import Table, median, percentile, rate, ratio, run_together
from enact.cli._client import Client
from enact.messages.inbox import Outcome
from enact.messages.local import Send

TITLE = "8. Telegram channel: events/s and latency per event beside the local channel (one daemon)"
CONVERSATIONS = (1, 8)
_ROOT = Path(__file__).resolve().parent.parent
_TOKEN = "7000001:bench-token"

sys.path.insert(0, str(_ROOT / "tests"))
from telegram_server import FakeBotApi  # noqa: E402  (the fake Bot API lives with the tests)


def _measure(conversations: int, events: int, one_event: Callable[[int, int], None]) -> tuple[float, list[float]]:
    """Events/s with one thread per conversation, and each event's seconds."""
    ready = threading.Barrier(conversations + 1)
    errors: list[BaseException] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def sender(index: int) -> None:
        try:
            ready.wait()
            for n in range(events):
                started = time.perf_counter()
                one_event(index, n)
                with lock:
                    latencies.append(time.perf_counter() - started)
        except BaseException as error:  # recorded, raised by run_together
            errors.append(error)
            ready.abort()

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(conversations)]
    elapsed = run_together(threads, ready, errors)
    return conversations * events / elapsed, latencies


def run(quick: bool) -> Table:
    events = 10 if quick else 150
    table = Table(TITLE, ["", "local", "telegram", "telegram ÷ local"])
    with tempfile.TemporaryDirectory(prefix="enact-bench-tg-", dir="/tmp") as directory, FakeBotApi(_TOKEN) as bot:
        home = Path(directory) / "h"
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            f'[channels.telegram]\nenabled = true\napi_base = "{bot.url}"\npoll_timeout_s = 20\n')
        daemon = start_daemon(home, Path(directory) / "daemon.log", {"ENACT_TELEGRAM_TOKEN": _TOKEN})
        try:
            clients = [Client(home, timeout=60) for _ in range(max(CONVERSATIONS))]
            round_number = [0]

            def local_event(index: int, n: int) -> None:
                outcome = clients[index].request(Send(text="hello", conversation=f"c{round_number[0]}-{index}"))
                if not isinstance(outcome, Outcome) or not outcome.reply:
                    raise RuntimeError(f"unexpected outcome {outcome!r}")

            def telegram_event(index: int, n: int) -> None:
                chat = 1000 * (round_number[0] + 1) + index
                bot.message(chat, "hello")
                if not bot.wait_sent(chat, n + 1, timeout=60):
                    raise RuntimeError(f"no reply to chat {chat} within 60 s")

            results: dict[tuple[str, int], tuple[float, list[float]]] = {}
            for conversations in CONVERSATIONS:
                for name, one_event in (("local", local_event), ("telegram", telegram_event)):
                    round_number[0] += 1
                    results[name, conversations] = _measure(conversations, events, one_event)
            for client in clients:
                client.close()
        finally:
            stop_daemon(daemon)
    for conversations in CONVERSATIONS:
        local, telegram = results["local", conversations][0], results["telegram", conversations][0]
        label = f"events/s, {conversations} conversation{'s' if conversations > 1 else ''}"
        table.add(label, rate(local), rate(telegram), ratio(telegram / local))
    for conversations in CONVERSATIONS:
        local_s, telegram_s = results["local", conversations][1], results["telegram", conversations][1]
        for what, pick in (("median", median), ("p90", lambda s: percentile(s, 0.9))):
            table.add(f"{what} ms per event, {conversations} conv.", f"{pick(local_s) * 1e3:.2f}",
                      f"{pick(telegram_s) * 1e3:.2f}", ratio(pick(telegram_s) / pick(local_s)))
    added = median(results["telegram", 1][1]) - median(results["local", 1][1])
    table.note(f"{events} events per conversation; added latency per event over the local channel "
               f"(median, 1 conversation): {added * 1e3:.2f} ms")
    table.note("local: local.Send over the control socket; telegram: post to the fake Bot API on loopback, "
               "wait for the bot's sendMessage")
    return table
