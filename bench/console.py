"""The web console under chat load: its overview and a task page served while
conversations run through a real daemon, and the chat figures with the
console open beside them and without.

One real ``enact daemon run`` (scripted runtime, no workers, so the task
page's task stays queued; the console on a free loopback port). Chat load:
four sender threads, each sending ``local.Send`` over its own control-socket
client, one message after another, for a fixed count. With the console open
beside: one browser-like client holds the live event stream (``/events``)
and another fetches the overview and the task page in turn, each over its
own keep-alive HTTP connection, for as long as the chat runs.

Baselines: for the pages, the one request ``enact status`` makes
(``control.Status`` with ``brief`` over the socket) under the same load,
the floor of any page that shows the daemon's state (the overview asks
four requests, the full status among them, and renders); for the chat, the same chat with no console client.
"""

from __future__ import annotations

import http.client
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench._daemons import start_daemon, stop_daemon
from bench._table import Table, percentile, rate, ratio, run_together
from enact.cli._client import Client
from enact.messages.console import Login, LoginLink
from enact.messages.control import Status
from enact.messages.inbox import Outcome
from enact.messages.local import Send
from enact.messages.tasks import Submit, Submitted

TITLE = "13. Console: the overview and a task page under chat load; chat with the console open and without"
_SENDERS = 4


class _Browser:
    """A signed-in client of the console over one keep-alive connection."""

    def __init__(self, home: Path) -> None:
        with Client(home, timeout=10) as client:
            link = client.request(Login())
        if not isinstance(link, LoginLink):
            raise RuntimeError(f"no console link: {link!r}")
        self.address = link.address
        host, port = link.address.rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)
        answer = self._get(urlsplit(link.url).path + "?" + urlsplit(link.url).query, {})
        self.cookie = answer.getheader("Set-Cookie", "").split(";", 1)[0]
        answer.read()

    def _get(self, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        self.connection.request("GET", path, headers={"Host": self.address, **headers})
        return self.connection.getresponse()

    def page(self, path: str) -> float:
        started = time.perf_counter()
        answer = self._get(path, {"Cookie": self.cookie})
        body = answer.read()
        elapsed = time.perf_counter() - started
        if answer.status != 200 or b"</html>" not in body:
            raise RuntimeError(f"{path} answered {answer.status}")
        return elapsed

    def hold_events(self, until: threading.Event) -> None:
        answer = self._get("/events", {"Cookie": self.cookie})
        while not until.is_set() and answer.read1(4096):
            pass

    def close(self) -> None:
        self.connection.close()


def _chat(home: Path, per_sender: int) -> tuple[float, list[float]]:
    """Events/s over the wall time and each send's seconds."""
    errors: list[BaseException] = []
    ready = threading.Barrier(_SENDERS + 1)
    latencies: list[float] = []

    def sender(index: int) -> None:
        try:
            with Client(home, timeout=60) as client:
                ready.wait()
                for _ in range(per_sender):
                    started = time.perf_counter()
                    outcome = client.request(Send(text="hello", conversation=f"bench-{index}"))
                    latencies.append(time.perf_counter() - started)
                    if not isinstance(outcome, Outcome) or outcome.status != "replied":
                        raise RuntimeError(f"unexpected outcome: {outcome!r}")
        except BaseException as error:
            errors.append(error)
            ready.abort()

    elapsed = run_together([threading.Thread(target=sender, args=(i,)) for i in range(_SENDERS)], ready, errors)
    return _SENDERS * per_sender / elapsed, latencies


def _beside(home: Path, task_id: int, per_sender: int, statuses: list[float], pause_s: float) -> dict[str, Any]:
    """The chat while the console is open, its pages fetched every
    ``pause_s`` (0: back to back): page times, and ``statuses`` filled with
    the baseline's ``control.Status`` round trips meanwhile."""
    done = threading.Event()
    streamer, reader = _Browser(home), _Browser(home)
    overview: list[float] = []
    task_page: list[float] = []
    stream = threading.Thread(target=streamer.hold_events, args=(done,), daemon=True)
    stream.start()

    def read_pages() -> None:
        with Client(home, timeout=30) as client:
            while not done.is_set():
                overview.append(reader.page("/"))
                task_page.append(reader.page(f"/tasks/{task_id}"))
                started = time.perf_counter()
                client.request(Status(brief=True))
                statuses.append(time.perf_counter() - started)
                done.wait(pause_s)

    pages = threading.Thread(target=read_pages)
    pages.start()
    try:
        events_per_s, latencies = _chat(home, per_sender)
    finally:
        done.set()
        pages.join()
        streamer.close()
        reader.close()
    return {"events_per_s": events_per_s, "latencies": latencies, "overview": overview, "task": task_page}


def _chat_with_console_open(home: Path, task_id: int, per_sender: int) -> tuple[float, list[float]]:
    """The chat with a console open as a person keeps it: the live stream,
    and a page every half second."""
    ignored: list[float] = []
    figures = _beside(home, task_id, per_sender, ignored, 0.5)
    return figures["events_per_s"], figures["latencies"]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def run(quick: bool) -> Table:
    per_sender = 25 if quick else 250
    table = Table(TITLE, ["figure", "baseline", "enact", "enact ÷ baseline"])
    workdir = Path(tempfile.mkdtemp(prefix="enact-bench-console-", dir="/tmp"))
    try:
        home = workdir / "h"
        home.mkdir(mode=0o700)
        repo = workdir / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.invalid",
                        "commit", "-q", "--allow-empty", "-m", "start"], check=True)
        daemon = start_daemon(home, workdir / "daemon.log", {
            "ENACT_CONSOLE_ADDR": "127.0.0.1:0", "ENACT_DAEMON_WORKERS": "0", "ENACT_DAEMON_COMMAND_SERVER": "false"})
        try:
            with Client(home, timeout=30) as client:
                submitted = client.request(Submit(request="a task to show", repo=str(repo), origin=""))
            if not isinstance(submitted, Submitted):
                raise RuntimeError(f"no task: {submitted!r}")
            _chat(home, max(5, per_sender // 10))  # warm up the conversations
            alone_rate, alone = _chat(home, per_sender)
            statuses: list[float] = []
            beside = _beside(home, submitted.task.id, per_sender, statuses, 0.0)
            open_rate, open_latencies = _chat_with_console_open(home, submitted.task.id, per_sender)
        finally:
            stop_daemon(daemon)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for name, samples in (("overview page", beside["overview"]), ("task page", beside["task"])):
        for label, fraction in (("p50", 0.5), ("p99", 0.99)):
            base, ours = percentile(statuses, fraction), percentile(samples, fraction)
            table.add(f"{name} {label} (baseline: control.Status)", _ms(base), _ms(ours), ratio(ours / base))
    table.add("chat events/s, console open (baseline: none)", rate(alone_rate), rate(open_rate),
              ratio(open_rate / alone_rate))
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        base, ours = percentile(alone, fraction), percentile(open_latencies, fraction)
        table.add(f"chat send {label}, console open (baseline: none)", _ms(base), _ms(ours), ratio(ours / base))
    table.add("chat events/s, pages back to back (baseline: none)", rate(alone_rate), rate(beside["events_per_s"]),
              ratio(beside["events_per_s"] / alone_rate))
    table.note(f"{_SENDERS} chat senders x {per_sender} messages; page times with the pages fetched back to back "
               f"({len(beside['overview'])} overviews, {len(beside['task'])} task pages) beside one open event "
               "stream; 'console open': the stream and a page every 0.5 s; lower is better for times")
    return table
