"""A stand-in for a daemon on a home's control socket, for the client's side
of odd peers: it accepts one connection, reads one request frame and answers
as the test says (hangs up, sends half a frame or an unexpected reply, or
answers as an older release would)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from enact.home import SOCKET_NAME
from enact.messages._framing import read_frame

Answer = Callable[[socket.socket, bytes], None]
"""Given the connection and the request frame's payload; writes what it likes."""


@contextmanager
def stand_in_daemon(home: Path, answer: Answer, timeout: float = 30) -> Iterator[None]:
    """Serve one connection on ``home``'s socket while the block runs."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(home / SOCKET_NAME))
        listener.listen(1)

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(timeout)
                answer(connection, read_frame(connection))

        peer = threading.Thread(target=serve, daemon=True)
        peer.start()
        try:
            yield
        finally:
            peer.join(timeout)
            (home / SOCKET_NAME).unlink()
