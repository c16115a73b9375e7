"""Sockets a call can stop from another thread in every phase, for the
HTTP runtimes (``openai``): a blocking ``connect`` would ignore a
cancellation until the kernel gives up, and a TLS socket must be shut as a
plain one to wake its handshake or read."""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket


def shut(sock: socket.socket) -> None:
    """Wake whatever blocks on ``sock`` in another thread. A TLS socket is
    shut as a plain one: its own ``shutdown`` would first drop the TLS state
    its handshake or read is using."""
    with contextlib.suppress(OSError):  # already closed
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def connect(host: str, port: int, timeout_s: float, wake: socket.socket) -> socket.socket:
    """A TCP connection to ``host:port``, connected without blocking so that
    a byte on ``wake`` (a cancellation, the deadline) ends the wait at once;
    a blocking ``connect`` would ignore both until the kernel gives up.
    (The name is resolved first, blocking: loopback and IP addresses resolve
    at once.)"""
    last: OSError = ConnectionError(f"{host}: no address")
    for family, kind, protocol, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, protocol)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code in (errno.EINPROGRESS, errno.EWOULDBLOCK):
                with selectors.DefaultSelector() as selector:
                    selector.register(sock, selectors.EVENT_WRITE)
                    selector.register(wake, selectors.EVENT_READ)
                    ready = {key.fileobj for key, _ in selector.select(timeout_s)}
                if wake in ready or sock not in ready:
                    raise TimeoutError(f"connecting to {host}:{port} was stopped")
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            sock.settimeout(timeout_s)
            return sock
        except TimeoutError:
            sock.close()
            raise
        except OSError as error:
            sock.close()
            last = error
    raise last
