"""The daemon's process and its host: log set-up, systemd's readiness
protocol, and the final exit."""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import NoReturn

log = logging.getLogger("enact.daemon")


def exit_process(code: int) -> NoReturn:
    """End the daemon's process once ``run`` has returned. Threads that
    overran the stop (a delivery program still running, an actor of a fenced
    daemon) must not keep it alive, so the process ends here without waiting
    for them; everything durable was committed before ``run`` returned."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def notify_systemd(state: bytes) -> None:
    """sd_notify without a dependency: one datagram to $NOTIFY_SOCKET."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state)
    except OSError as error:
        log.warning("could not notify systemd: %s", error)
