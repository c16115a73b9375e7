"""Talking to the running daemon over its control socket."""

from __future__ import annotations

import socket
from pathlib import Path

from enact.home import SOCKET_NAME
from enact.messages import decode, encode
from enact.messages._framing import read_frame, write_frame
from enact.messages.control import Error


class NotRunning(RuntimeError):
    def __init__(self, home: Path) -> None:
        super().__init__(f"enact is not running (home: {home})")
        self.home = home


class DaemonError(RuntimeError):
    """The daemon answered with ``control.Error``."""


class NoAnswer(DaemonError, TimeoutError):
    """The daemon took the request but did not answer in time (it is hung or
    stopped). A DaemonError, so commands report it in one line, and still the
    TimeoutError that callers polling for a daemon already expect."""

    def __init__(self, home: Path, timeout: float) -> None:
        super().__init__(f"the daemon did not answer within {timeout:g} s (home: {home})")
        self.home = home


class Client:
    """One connection to the daemon; requests are answered in order."""

    def __init__(self, home: Path, *, timeout: float | None = 130.0) -> None:
        self.home = home
        self._timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(home / SOCKET_NAME))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            self._sock.close()
            raise NotRunning(home) from None

    def request(self, message: object) -> object:
        try:
            write_frame(self._sock, encode(message))
            reply = decode(read_frame(self._sock))
        except TimeoutError:
            raise NoAnswer(self.home, self._timeout or 0.0) from None
        except (ConnectionError, EOFError) as error:  # EOFError: also gone in the middle of a reply
            raise NotRunning(self.home) from error
        if isinstance(reply, Error):
            raise DaemonError(reply.message)
        return reply

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def request(home: Path, message: object, *, timeout: float | None = 130.0) -> object:
    with Client(home, timeout=timeout) as client:
        return client.request(message)
