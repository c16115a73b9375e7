"""Handing a command to the command server (``_server``), and the few bytes
the two exchange.

Imported before anything else the command line needs, so it imports nothing
but what a bare interpreter has at hand: its cost is the command's cost
whenever a daemon runs.

The exchange, over ``$ENACT_HOME/cli.sock``: the client sends a 4-byte
big-endian length together with its standard input, output and error (as
file descriptors), then that many bytes: NUL-separated fields, the first
five fixed (the hand-off version, enact's version, where the client's enact
package lives, the working directory, the umask in octal), then the number
of arguments, the arguments, and the environment as ``NAME=value``. The
server answers with 8-byte records, a 4-byte tag and a 4-byte number:
``pid `` and the command's process id, later ``exit`` and its wait status;
or ``busy``/``skew``/``old `` (and 0), after which the client runs the
command itself.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

import enact
from enact.exit_codes import ExitCode
from enact.home import CLI_SOCKET_NAME, home_directory

HANDOFF_VERSION = "1"
DISABLE_VARIABLE = "ENACT_COMMAND_SERVER"
"""``ENACT_COMMAND_SERVER=off`` runs every command in its own process."""
LOCAL_COMMANDS = frozenset({"daemon", "backup"})
"""Commands that are processes of their own: ``daemon run`` becomes the
daemon; ``backup restore --takeover`` stops the daemon the server runs in,
and a backup opens the home's LMDB environment itself."""
RECORD_BYTES = 8
STARTED, EXITED = b"pid ", b"exit"
BUSY, SKEW, STALE = b"busy", b"skew", b"old "
"""Refusals: too many commands running; another version of enact; the
server's code is older than the files on disk."""
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def package_directory() -> str:
    return os.path.dirname(os.path.abspath(enact.__file__))


def encode_request(argv: list[str]) -> bytes:
    umask = os.umask(0)
    os.umask(umask)
    fields = [HANDOFF_VERSION, enact.__version__, package_directory(), os.getcwd(), f"{umask:o}",
              str(len(argv)), *argv, *(f"{name}={value}" for name, value in os.environ.items())]
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def _home(argv: list[str]) -> str:
    """The home a command names (``--home``, the one nearest the command
    winning, as the click options do), else the default. Only which server
    to ask depends on it: the command parses its own options again there."""
    home = ""
    for n, word in enumerate(argv):
        if word == "--":
            break
        if word == "--home" and n + 1 < len(argv):
            home = argv[n + 1]
        elif word.startswith("--home="):
            home = word.partition("=")[2]
    return os.path.expanduser(home) if home else home_directory()


def _standard_streams() -> list[int]:
    """Descriptors 0, 1 and 2, with /dev/null for any that is closed."""
    streams = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            streams.append(fd)
        except OSError:
            streams.append(os.open(os.devnull, os.O_RDWR))
    return streams


def _read_record(connection: socket.socket) -> tuple[bytes, int] | None:
    data = b""
    while len(data) < RECORD_BYTES:
        chunk = connection.recv(RECORD_BYTES - len(data))
        if not chunk:
            return None
        data += chunk
    return data[:4], int.from_bytes(data[4:], "big")


def run_in_command_server(argv: list[str]) -> int | None:
    """Run the command in the command server and return its exit code; None
    when it must run here instead (no server, or one that refused)."""
    if os.environ.get(DISABLE_VARIABLE) == "off" or not argv or argv[0] in LOCAL_COMMANDS:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(os.path.join(_home(argv), CLI_SOCKET_NAME))
        request = encode_request(argv)
        socket.send_fds(connection, [len(request).to_bytes(4, "big")], _standard_streams())
        connection.sendall(request)
        first = _read_record(connection)
    except OSError:
        connection.close()
        return None
    except KeyboardInterrupt:  # before the command started: the server ends it once we are gone
        connection.close()
        return ExitCode.INTERRUPTED
    if first is None or first[0] != STARTED:
        connection.close()
        return None
    return _wait_for(connection, pid=first[1])


def _wait_for(connection: socket.socket, *, pid: int) -> int:
    """Pass this process's signals on to the command until it exits, then
    end as it ended (by the same signal, if one killed it)."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # ended already; its exit record is on its way
            return

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    try:
        last = _read_record(connection)
    except OSError:
        last = None
    finally:
        connection.close()
    if last is None or last[0] != EXITED:
        print("enact: the command server went away before the command ended", file=sys.stderr)
        return ExitCode.FAILED
    code = os.waitstatus_to_exitcode(last[1])
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code
