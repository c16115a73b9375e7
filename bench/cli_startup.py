"""What an ``enact`` command costs before it talks to the daemon.

A command's process is started against a home whose control socket is a
listener in this process and whose command server (``enact.cli._server``, as
the daemon starts it) is running; the figure is the time from starting the
process to the moment the first byte of its request arrives, so it covers
the interpreter, the hand-off to the command server, the fork there and
building and encoding the request, and nothing the daemon does. The same
commands in their own process (``ENACT_COMMAND_SERVER=off``: no daemon's
command server, or another version) are shown beside. The baseline is the least any Python program pays for the
same: a bare interpreter that imports ``socket``, connects and sends a byte. ``enact --version``
(which talks to no daemon) is timed whole, beside ``python -c pass``.

Every process runs with its bytecode cached, as an installed enact has it:
under a prefix of the benchmark's own (``PYTHONPYCACHEPREFIX``), written by
a warm-up run of each command that is not counted. Without it, a checkout
without ``__pycache__`` run under ``PYTHONDONTWRITEBYTECODE`` would compile
each imported module from source at every start, which no user pays.

Target: at most 60 ms before the daemon is reached.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench._table import Table, median, ratio
from enact.cli._handoff import DISABLE_VARIABLE
from enact.home import CLI_SOCKET_NAME

TITLE = "5. CLI start-up: time until a command reaches the daemon, vs a bare interpreter connecting"
TARGET_MS = 60.0

_BARE_CONNECT = "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'x')"


class _Listener:
    """A control socket that records when each request's first byte arrives
    and then hangs up: the command under test exits on its own (it reports a lost
    connection), which this benchmark does not time."""

    def __init__(self, path: Path) -> None:
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(path))
        self._server.listen(8)
        self.arrivals: list[float] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection:
                if connection.recv(1):
                    self.arrivals.append(time.monotonic())

    def close(self) -> None:
        self._server.close()


def _until_connected(argv: list[str], listener: _Listener, env: dict[str, str]) -> float:
    before = len(listener.arrivals)
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.wait(timeout=30)
    # The listener's thread records the arrival; on a loaded machine it may
    # do so only after the sender has already exited.
    deadline = time.monotonic() + 5
    while len(listener.arrivals) == before and time.monotonic() < deadline:
        time.sleep(0.001)
    if len(listener.arrivals) == before:
        raise RuntimeError(f"{argv[:3]} sent no request (exit {process.returncode})")
    return listener.arrivals[before] - started


def _alone(commands: dict[str, list[str]]) -> dict[str, str]:
    return {name: f"{name} (own process)" for name in commands}


@contextlib.contextmanager
def _command_server(home: Path) -> Iterator[None]:
    """The daemon's command server for ``home``, until it listens."""
    server = subprocess.Popen([sys.executable, "-m", "enact.cli._server", str(home)], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (home / CLI_SOCKET_NAME).exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the command server did not start")
            time.sleep(0.05)
        yield
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


def _whole(argv: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=30)
    return time.monotonic() - started


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def run(quick: bool) -> Table:
    runs = 1 if quick else 30  # --quick: the smoke test, every command once after its warm-up
    enact = str(Path(sys.executable).with_name("enact"))
    table = Table(TITLE, ["command", "bare Python ms", "enact ms", "enact ÷ bare", f"≤ {TARGET_MS:.0f} ms"])
    with tempfile.TemporaryDirectory(prefix="enact-bench-cli-") as directory:
        home = Path(directory)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_") and k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(home / "bytecode")
        sock = home / "control.sock"
        listener = _Listener(sock)
        try:
            bare = [sys.executable, "-c", _BARE_CONNECT, str(sock)]
            commands = {
                "enact status": [enact, "--home", str(home), "status"],
                "enact send hello": [enact, "--home", str(home), "send", "hello"],
                "enact turns": [enact, "--home", str(home), "turns"],
            }
            alone = {**env, DISABLE_VARIABLE: "off"}
            samples: dict[str, list[float]] = {name: [] for name in ("bare", *commands, *_alone(commands).values())}
            with _command_server(home):
                for _ in range(runs + 1):  # alternated, so drift in the machine's speed hits both alike
                    samples["bare"].append(_until_connected(bare, listener, env))
                    for name, argv in commands.items():
                        samples[name].append(_until_connected(argv, listener, env))
                        samples[_alone(commands)[name]].append(_until_connected(argv, listener, alone))
        finally:
            listener.close()
        for taken in samples.values():
            del taken[0]  # the warm-up, which wrote the bytecode
        floor = median(samples["bare"])
        for name in [*commands, *_alone(commands).values()]:
            cost = median(samples[name])
            verdict = "PASS" if cost * 1000 <= TARGET_MS else "FAIL"
            table.add(name, _ms(floor), _ms(cost), ratio(cost / floor), verdict if name in commands else "")
        version = [_whole([enact, "--version"], env) for _ in range(runs + 1)][1:]
        interpreter = [_whole([sys.executable, "-c", "pass"], env) for _ in range(runs + 1)][1:]
        table.add("enact --version (whole process)", _ms(median(interpreter)), _ms(median(version)),
                  ratio(median(version) / median(interpreter)), "")
    table.note(f"medians of {runs} runs after a warm-up, alternated, bytecode cached; bare Python = an interpreter "
               "that imports socket and connects; own process: the command imports click and its messages itself")
    return table
