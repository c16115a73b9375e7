from __future__ import annotations

import socket

from enact._app.control import MAX_CONNECTIONS
from enact.messages import decode, encode
from enact.messages._framing import read_frame, write_frame
from enact.messages.control import Error, Status, StatusReport

from conftest import DaemonFactory


def test_connections_beyond_the_cap_are_refused_and_the_others_still_served(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    path = str(daemon.home / "control.sock")
    held = []
    try:
        for _ in range(MAX_CONNECTIONS):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)  # blocking: waits while the backlog is full
            sock.settimeout(10)
            held.append(sock)
        write_frame(held[0], encode(Status()))
        assert isinstance(decode(read_frame(held[0])), StatusReport)
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        extra.connect(path)
        extra.settimeout(10)
        refused = decode(read_frame(extra))
        assert isinstance(refused, Error) and "connections are open" in refused.message
        extra.close()
    finally:
        for sock in held:
            sock.close()
    assert daemon.cli_json("status", "--json")["pid"] == daemon.pid
