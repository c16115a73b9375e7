"""Starting a release's daemon on a home and waiting until it answers.

The updater starts a daemon the way ``enact daemon start`` does (its own
session, its output appended to the home's log), but with the release's
own interpreter, from the home rather than a checkout (``python -m`` puts
its working directory first on the path), and without ``PYTHONPATH``:
nothing of the release that starts it may shadow the release it starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from enact.cli._client import Client, DaemonError, NotRunning, request
from enact.home import LOG_NAME
from enact.messages import DecodeError, decode
from enact.messages._codec import from_wire
from enact.messages.control import EVERY_RELEASES_STATUS, Shutdown, StatusReport
from enact.update.releases import Release, release_environment

POLL_S = 0.1
STOP_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Started:
    """A daemon the updater started, and where its log output begins."""

    release: Release
    process: subprocess.Popen[bytes]
    log_from: int

    def written(self, home: Path) -> list[str]:
        """What it wrote to the home's log so far."""
        try:
            with open(home / LOG_NAME, "rb") as log:
                log.seek(self.log_from)
                return log.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def exit_line(self, home: Path) -> str:
        """How it ended, with its last word, for a reason line."""
        lines = [line for line in self.written(home) if line.strip()]
        said = f": {lines[-1].strip()}" if lines else ""
        return f"exited with status {self.process.returncode}{said}"


def run_enact(release: Release, home: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``enact ARGS`` of ``release`` on ``home``, its output captured."""
    return subprocess.run([release.python, "-m", "enact", *args], cwd=home,
                          env=release_environment(home), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    """The line that says why a command ended as it did."""
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def serving(home: Path) -> StatusReport | None:
    """The status of the daemon serving ``home``; None when none answers.
    Asked in full (``EVERY_RELEASES_STATUS``), the one request every
    release answers, in the one shape every release reads (each actor's
    record, the storage); read leniently, since another release's daemon
    may say fields this one does not know."""
    try:
        with Client(home, timeout=5.0, decode_with=_status_of_any_release) as client:
            report = client.send_frame(EVERY_RELEASES_STATUS)
    except (NotRunning, DaemonError, DecodeError, OSError):
        return None
    return report if isinstance(report, StatusReport) else None


def _status_of_any_release(frame: bytes) -> object:
    """A reply frame, a status's fields this release does not know dropped
    (a newer release adds some) before the strict decode."""
    try:
        document = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return decode(frame)  # says why, as a DecodeError
    if isinstance(document, dict) and document.get("type") == "control.StatusReport":
        document = {**document, "body": _known_fields(StatusReport, document.get("body"))}
    return from_wire(document)


def _known_fields(hint: Any, value: object) -> object:
    """``value`` with every field the dataclasses in ``hint`` do not declare left out, at any depth."""
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        hints = typing.get_type_hints(hint)
        return {name: _known_fields(hints[name], item) for name, item in value.items() if name in hints}
    if isinstance(value, list):
        return [_known_fields(next(iter(typing.get_args(hint)), Any), item) for item in value]
    for option in typing.get_args(hint):  # X | None
        if dataclasses.is_dataclass(option) and isinstance(value, dict):
            return _known_fields(option, value)
    return value


def launch(release: Release, home: Path, *, metrics_addr: str) -> Started:
    """``daemon run --takeover`` of ``release`` on ``home``: it fences the
    daemon serving there, if any."""
    argv = [release.python, "-m", "enact", "daemon", "run", "--home", str(home), "--takeover"]
    if metrics_addr:
        argv += ["--metrics-addr", metrics_addr]
    with open(os.open(home / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
        log_from = log.tell()
        process = subprocess.Popen(argv, cwd=home, env=release_environment(home), stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log, start_new_session=True)
    return Started(release=release, process=process, log_from=log_from)


def wait_ready(started: Started, home: Path, timeout_s: float) -> StatusReport | str:
    """Its status once it answers as the home's daemon; else one line why not
    (it exited, or did not answer within ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if started.process.poll() is not None:
            return f"the daemon of {started.release.short} {started.exit_line(home)}"
        report = serving(home)
        if report is not None and report.pid == started.process.pid:
            return report
        time.sleep(POLL_S)
    return f"the daemon of {started.release.short} did not answer within {timeout_s:g} s"


def stop(started: Started, home: Path) -> None:
    """Stop it gracefully if it still serves; wait for its exit either way."""
    if started.process.poll() is None:
        report = serving(home)
        if report is not None and report.pid == started.process.pid:
            with contextlib.suppress(NotRunning, DaemonError, OSError):
                request(home, Shutdown(), timeout=10.0)
    try:
        started.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        started.process.kill()
        started.process.wait(timeout=10)
