"""Control-socket round trip of ``control.Status`` vs a bare framed echo server.

enact: a real ``enact daemon run`` process on a temporary home, asked
``control.Status`` by ``enact.cli._client.Client`` (orjson codec both ways).
Floor: a separate process serving the same socket shape (a thread per
connection, 4-byte length-prefixed frames) that answers every frame with a
payload of the status report's size, asked with bare frames and no codec.
Each client thread keeps one connection and sends its requests one after
another; latency is per request, requests/s is all clients over the wall time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench._table import Table, median, percentile, rate, ratio, run_together, us
from enact.cli._client import Client, NotRunning
from enact.home import SOCKET_NAME
from enact.messages import decode, encode
from enact.messages._framing import ConnectionClosed, FrameError, read_frame, write_frame
from enact.messages.control import Status, StatusReport

TITLE = "1. Control socket: control.Status round trip vs a bare framed echo server"
_ROOT = Path(__file__).resolve().parent.parent

Request = Callable[[], object]


# -- the floor: a framed echo server in its own process -------------------

def serve_echo(path: str, payload: bytes) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_echo, args=(connection, payload), daemon=True).start()


def _echo(connection: socket.socket, payload: bytes) -> None:
    with connection:
        try:
            while True:
                read_frame(connection)
                write_frame(connection, payload)
        except (ConnectionClosed, FrameError, OSError):
            return


# -- processes ----------------------------------------------------------------

def _start_daemon(home: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env["ENACT_HOME"] = str(home)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daemon exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with Client(home, timeout=2) as client:
                report = client.request(Status())
            if isinstance(report, StatusReport) and report.pid == process.pid:
                return process
        except (NotRunning, OSError):
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"daemon not ready within 30 s:\n{log.read_text(errors='replace')}")


def _start_echo(path: Path, payload: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-m", "bench.control_socket", "--echo", str(path), str(payload)],
                               cwd=_ROOT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
                return process
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.05)
    process.kill()
    raise RuntimeError("echo server did not start within 30 s")


def _stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=10)


# -- clients ------------------------------------------------------------------

def _enact_client(home: Path) -> tuple[Request, Callable[[], None]]:
    client = Client(home, timeout=30)
    return (lambda: client.request(Status())), client.close


def _bare_client(path: Path, frame: bytes) -> tuple[Request, Callable[[], None]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(str(path))

    def request() -> object:
        write_frame(sock, frame)
        return read_frame(sock)

    return request, sock.close


def _measure(connect: Callable[[], tuple[Request, Callable[[], None]]], clients: int, count: int,
             warmup: int) -> tuple[list[float], float]:
    """Latencies of every timed request, and requests/s over all clients."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    ready = threading.Barrier(clients + 1)

    def client() -> None:
        request, close = connect()
        mine = []
        try:
            for _ in range(warmup):
                request()
            ready.wait()
            for _ in range(count):
                started = time.perf_counter()
                request()
                mine.append(time.perf_counter() - started)
        except BaseException as error:
            errors.append(error)
            ready.abort()
        finally:
            close()
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    elapsed = run_together(threads, ready, errors)
    return latencies, clients * count / elapsed


def _figures(latencies: list[float], per_second: float) -> dict[str, float]:
    return {"p50 µs": percentile(latencies, 0.50), "p99 µs": percentile(latencies, 0.99), "requests/s": per_second}


def _codec_seconds(request_frame: bytes, reply: bytes, count: int) -> float:
    """Encoding and decoding one request and one reply, as both ends do."""
    report = decode(reply)
    started = time.perf_counter()
    for _ in range(count):
        decode(encode(Status()))
        decode(encode(report))
    return (time.perf_counter() - started) / count


def run(quick: bool) -> Table:
    count, warmup, trials = (200, 50, 1) if quick else (2_000, 200, 3)
    directory = Path(tempfile.mkdtemp(prefix="enact-bench-", dir="/tmp"))
    home = directory / "h"
    home.mkdir(mode=0o700)
    daemon = _start_daemon(home, directory / "daemon.log")
    echo: subprocess.Popen[bytes] | None = None
    try:
        request_frame = encode(Status())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(home / SOCKET_NAME))
            write_frame(sock, request_frame)
            reply = read_frame(sock)
        (directory / "payload").write_bytes(reply)
        echo_path = directory / "echo.sock"
        echo = _start_echo(echo_path, directory / "payload")

        table = Table(TITLE, ["clients", "figure", "floor (echo)", "enact (Status)", "enact ÷ floor"])
        for clients in (1, 4):
            floor: list[dict[str, float]] = []
            enact: list[dict[str, float]] = []
            for _ in range(trials):  # alternating, so a burst of load elsewhere hits both
                floor.append(_figures(*_measure(lambda: _bare_client(echo_path, request_frame), clients, count,
                                                warmup)))
                enact.append(_figures(*_measure(lambda: _enact_client(home), clients, count, warmup)))
            for figure in floor[0]:
                low, high = median([t[figure] for t in floor]), median([t[figure] for t in enact])
                shown = rate if figure == "requests/s" else us
                table.add(str(clients), figure, shown(low), shown(high), ratio(high / low))
        table.note(f"median of {trials} alternating trial(s) of {count:,} requests per client after {warmup} of "
                   f"warm-up, one connection per client thread; request {len(request_frame)} B, reply {len(reply)} B")
        table.note("the daemon answers Status in the connection's thread (storage stats and actor statuses); "
                   "the floor client sends pre-encoded frames and does not decode the reply")
        table.note(f"CPU of the codec alone per round trip (encode and decode Status and the report, in this "
                   f"process): {us(_codec_seconds(request_frame, reply, count))} µs")
    finally:
        if echo is not None:
            _stop(echo)
        code = _stop(daemon)
        log = (directory / "daemon.log").read_text(errors="replace")
        shutil.rmtree(directory, ignore_errors=True)
    if code != 0:
        raise RuntimeError(f"the daemon exited with {code} on SIGTERM:\n{log}")
    return table


if __name__ == "__main__" and sys.argv[1:2] == ["--echo"]:
    serve_echo(sys.argv[2], Path(sys.argv[3]).read_bytes())
