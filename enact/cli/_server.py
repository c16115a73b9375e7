"""The command server: a warm process that runs command-line commands.

``python -m enact.cli._server HOME`` is started by the daemon (``CommandServer``
below) once its control socket listens. It loads click, every command and
every message type once, then listens on ``HOME/cli.sock``; for each command
handed to it (``_handoff``) it forks, and the fork takes the client's
standard streams, directory, umask, environment and arguments and runs the
command as the client would have, talking to the daemon like any other
client. The server reaps the fork and sends the client its wait status; a
client that goes away has its command terminated.

It holds no storage and no daemon state: what a command may do is what the
same command may do from a shell. It ends when the daemon does (its standard
input, a pipe from the daemon, reaches end of file), and refuses a command
(the client then runs it itself) from another version of enact, or once the
code on disk is newer than what it loaded, and then exits: the daemon starts
a fresh one.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import NoReturn

from enact.cli._handoff import (
    BUSY,
    EXITED,
    HANDOFF_VERSION,
    RECORD_BYTES,
    SKEW,
    STALE,
    STARTED,
    package_directory,
)
from enact.exit_codes import ExitCode
from enact.home import CLI_SOCKET_NAME
from enact.one_cpu import unpinned

log = logging.getLogger("enact.cli.server")

MAX_REQUEST_BYTES = 1 << 20
HANDSHAKE_TIMEOUT_S = 2.0
MAX_RUNNING = 64
_FIXED_FIELDS = 5


def _record(tag: bytes, number: int) -> bytes:
    return tag + number.to_bytes(RECORD_BYTES - len(tag), "big")


def _code_stamp() -> int:
    """The newest modification time of the enact package's Python files."""
    newest = 0
    for directory, _, names in os.walk(package_directory()):
        for name in names:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(directory, name)).st_mtime_ns)
    return newest


def _preload() -> None:
    """Everything a command imports, once, before the first fork."""
    from enact import components
    from enact.messages._registry import protocols

    for target in components.load().cli_commands().values():
        importlib.import_module(target.partition(":")[0])
    for protocol in protocols():
        importlib.import_module(f"enact.messages.{protocol}")
    for module in ("uuid", "datetime", "orjson", "enact.messages._framing"):
        importlib.import_module(module)


class _Request:
    """What the client sent: parsed, or the reason it cannot be run here."""

    def __init__(self, payload: bytes) -> None:
        fields = payload.decode("utf-8", "surrogateescape").split("\0")
        if len(fields) < _FIXED_FIELDS + 1 or fields[0] != HANDOFF_VERSION:
            raise ValueError("not a hand-off request of this version")
        _, self.version, self.package, self.cwd, umask, count = fields[:_FIXED_FIELDS + 1]
        self.umask = int(umask, 8)
        rest = fields[_FIXED_FIELDS + 1:]
        self.argv = rest[:int(count)]
        self.environ = dict(entry.partition("=")[::2] for entry in rest[int(count):] if "=" in entry)


def _receive(connection: socket.socket) -> tuple[_Request, list[int]]:
    connection.settimeout(HANDSHAKE_TIMEOUT_S)
    message, fds, _, _ = socket.recv_fds(connection, 4, 3)
    try:
        if len(message) != 4 or len(fds) != 3:
            raise ValueError("a hand-off starts with its length and three descriptors")
        length = int.from_bytes(message, "big")
        if length > MAX_REQUEST_BYTES:
            raise ValueError(f"a hand-off of {length} bytes is over the limit")
        payload = b""
        while len(payload) < length:
            chunk = connection.recv(length - len(payload))
            if not chunk:
                raise ValueError("the client went away inside its request")
            payload += chunk
        return _Request(payload), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _same_user(connection: socket.socket) -> bool:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    return bool(uid == os.getuid())


class Server:
    def __init__(self, home: Path) -> None:
        self.path = home / CLI_SOCKET_NAME
        self.loaded_stamp = _code_stamp()
        self.version = importlib.import_module("enact").__version__
        self.running: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stopping = False

    def listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a server of a daemon that died, or of the one this daemon took over from
        previous = os.umask(0o177)
        try:
            self.listener.bind(str(self.path))
        finally:
            os.umask(previous)
        self.listener.listen(16)
        self.inode = os.stat(self.path).st_ino
        self.wakeup_read, wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_read, False)
        os.set_blocking(wakeup_write, False)
        signal.set_wakeup_fd(wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd is written
        self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
        self.selector.register(sys.stdin, selectors.EVENT_READ, self._daemon_input)
        self.selector.register(self.wakeup_read, selectors.EVENT_READ, self._reap)

    def serve(self) -> None:
        while not self.stopping or self.running:
            for key, _ in self.selector.select(timeout=1.0):
                key.data(key.fileobj)
            self._reap(None)
        self._close()

    def _close(self) -> None:
        # Only our own socket: a newer daemon's server may listen on the path by now.
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self.inode:
                self.path.unlink()
        self.listener.close()

    def _stop_listening(self) -> None:
        if not self.stopping:
            self.stopping = True
            self.selector.unregister(self.listener)
            self._close()

    def _daemon_input(self, stream: object) -> None:
        if not os.read(sys.stdin.fileno(), 4096):  # the daemon is gone, or stops
            self.selector.unregister(sys.stdin)
            self._stop_listening()

    def _accept(self, _: object) -> None:
        connection, _ = self.listener.accept()
        try:
            if not _same_user(connection):
                connection.close()
                return
            request, fds = _receive(connection)
        except (OSError, ValueError) as error:
            log.warning("command server: a hand-off refused: %s", error)
            connection.close()
            return
        refusal = self._refusal(request)
        if refusal is not None:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                connection.sendall(_record(refusal, 0))
            connection.close()
            if refusal == STALE:
                self._stop_listening()
            return
        try:
            pid = os.fork()
        except OSError as error:
            log.warning("command server: cannot fork: %s", error)
            pid = -1
        if pid == 0:
            _run_command(request, fds)
        for fd in fds:
            os.close(fd)
        if pid < 0:
            with contextlib.suppress(OSError):
                connection.sendall(_record(BUSY, 0))
            connection.close()
            return
        self.running[pid] = connection
        try:
            connection.sendall(_record(STARTED, pid))
        except OSError:
            self._client_gone(connection)
            return
        self.selector.register(connection, selectors.EVENT_READ, self._client_gone)

    def _refusal(self, request: _Request) -> bytes | None:
        if request.version != self.version or request.package != package_directory():
            return SKEW
        if len(self.running) >= MAX_RUNNING:
            return BUSY
        if _code_stamp() != self.loaded_stamp:
            return STALE
        return None

    def _client_gone(self, connection: object) -> None:
        """The client sends nothing after its request: readable means gone."""
        for pid, held in self.running.items():
            if held is connection:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                self.selector.unregister(held)
                return

    def _reap(self, _: object) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.wakeup_read, 512)
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.running.pop(pid, None)
            if connection is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(connection)
            with contextlib.suppress(OSError):
                connection.sendall(_record(EXITED, status))
            connection.close()


def _run_command(request: _Request, fds: list[int]) -> NoReturn:
    """In the fork: become the client's command, then exit with its code."""
    code: int = ExitCode.FAILED
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        # The server's sockets, pipes and the client's originals: the server
        # alone answers the client, and nothing of it leaks into the command.
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                      line_buffering=os.isatty(1))
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                      errors="backslashreplace", line_buffering=True)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.environ)
        os.chdir(request.cwd)
        sys.argv = ["enact", *request.argv]
        from enact.cli._group import main

        main(args=request.argv, prog_name="enact")
        code = ExitCode.DONE
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt:
        code = ExitCode.INTERRUPTED
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
    os._exit(code)


def _exit_code(value: object) -> int:
    if value is None:
        return ExitCode.DONE
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return ExitCode.FAILED


class CommandServer:
    """The daemon's side: the server process, started again (after a pause)
    whenever it ends while the daemon runs, and ended with the daemon. One
    that keeps failing soon after it starts is given up on: commands then
    run in their own processes, as without it."""

    RESTART_PAUSE_S = 1.0
    QUICK_FAILURE_S = 10.0
    MAX_QUICK_FAILURES = 3

    def __init__(self, home: Path) -> None:
        self.home = home
        self._process: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._keep_running, name="enact-command-server", daemon=True)

    def start(self) -> None:
        self._spawn()
        self._watcher.start()

    def _spawn(self) -> None:
        self._started_at = time.monotonic()
        with unpinned():  # the commands it forks inherit its CPUs
            self._process = subprocess.Popen(
                [sys.executable, "-m", "enact.cli._server", str(self.home)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=None, close_fds=True,
            )

    def _keep_running(self) -> None:
        quick_failures = 0
        while True:
            process = self._process
            if process is not None:
                # Woken by its end alone: a stop ends it too (its input closes).
                process.wait()
            if process is None or self._stopping.is_set():
                return
            if process.returncode == 0:  # it found its code out of date
                quick_failures = 0
            else:
                quick = time.monotonic() - self._started_at < self.QUICK_FAILURE_S
                quick_failures = quick_failures + 1 if quick else 1
                if quick_failures >= self.MAX_QUICK_FAILURES:
                    log.error("the command server failed %d times in a row soon after it started; commands run "
                              "in their own processes", quick_failures)
                    return
                log.warning("the command server exited with %s; starting another", process.returncode)
            if self._stopping.wait(self.RESTART_PAUSE_S):
                return
            self._spawn()

    def stop(self, timeout: float) -> None:
        """Close its input: it stops listening at once and ends once the
        commands it runs have ended; killed if that takes over ``timeout``
        (0: left to end by itself)."""
        self._stopping.set()
        process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        if timeout <= 0:
            return
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.poll() is None:
            process.kill()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    home = Path(sys.argv[1])
    _preload()
    server = Server(home)
    server.listen()
    server.serve()


if __name__ == "__main__":
    main()
