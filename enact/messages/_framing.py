"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import TypeVar

import orjson

from enact.errors import EnactError

T = TypeVar("T")

MAX_FRAME_BYTES = 1 << 20
_LENGTH = struct.Struct(">I")
PAGE_BYTES = MAX_FRAME_BYTES // 2
"""What one page of a listing (turns, facts) may hold, as the items' own
JSON: half the frame, leaving room for the reply's other fields."""


class FrameError(EnactError, ValueError):
    """The peer sent something that is not a frame we accept."""


class ConnectionClosed(EnactError, EOFError):
    """The peer closed the connection between frames."""


class TruncatedFrame(FrameError, EOFError):
    """The peer closed the connection inside a frame: bad input, and gone."""


def time_out_blocking(sock: socket.socket, timeout_s: float | None) -> None:
    """A blocking socket whose every receive and send gives up after
    ``timeout_s`` (``BlockingIOError``; ``None``: never), timed by the
    kernel: Python's own socket timeout polls before every call, one more
    system call and one more hand-over of the interpreter lock each. A send
    that makes progress is timed again from where it got to, not as a whole."""
    sock.settimeout(None)
    if timeout_s is None:
        return
    seconds = int(timeout_s)
    microseconds = int((timeout_s - seconds) * 1_000_000)
    if not seconds and not microseconds:  # the kernel reads 0 as never
        microseconds = 1
    timeval = struct.pack("@ll", seconds, microseconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def write_frame(sock: socket.socket, payload: bytes) -> None:
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def read_frame(sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    header = _read_exactly(sock, _LENGTH.size, allow_eof=True)
    (length,) = _LENGTH.unpack(header)
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    if not length:  # nothing to read (and a recv of 0 bytes is not asked for)
        return b""
    return _read_exactly(sock, length, allow_eof=False)


RECEIVE_BYTES = 1 << 16
"""What a ``FrameReader`` asks the kernel for at once: a request or a
status reply whole, with its length."""


class FrameReader:
    """The frames that arrive on one connection, in order.

    ``read_frame`` receives a frame's length and then its body: two system
    calls, each handing the interpreter lock over and taking it back, which
    with several connections' threads busy is a wait for it each time. A
    reader receives as much as has arrived, nearly always the whole frame
    with its length at once, and keeps whatever came after it (a peer that
    sends its next frame early) for the next ``read``. What a frame may be,
    and the errors, are ``read_frame``'s."""

    __slots__ = ("_buffer", "_max_bytes", "_sock")

    def __init__(self, sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._sock = sock
        self._max_bytes = max_bytes
        self._buffer = b""

    def read(self) -> bytes:
        received = self._buffer or self._sock.recv(RECEIVE_BYTES)
        if len(received) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(received)
            end = _LENGTH.size + length
            if length <= self._max_bytes and len(received) >= end:  # nearly always
                self._buffer = received[end:]
                return received[_LENGTH.size:end]
        elif not received:
            raise ConnectionClosed()
        self._buffer = b""
        return self._rest_of(received)

    def _rest_of(self, received: bytes) -> bytes:
        """The frame ``received`` begins, received to its end (nothing past it)."""
        have = bytearray(received)
        while len(have) < _LENGTH.size:
            self._receive(have, _LENGTH.size)
        (length,) = _LENGTH.unpack_from(have)
        if length > self._max_bytes:
            raise FrameError(f"frame of {length} bytes exceeds the limit of {self._max_bytes}")
        end = _LENGTH.size + length
        while len(have) < end:
            self._receive(have, end)
        return bytes(memoryview(have)[_LENGTH.size:])  # one copy, not two

    def _receive(self, have: bytearray, end: int) -> None:
        chunk = self._sock.recv(end - len(have))
        if not chunk:
            part, whole = ((len(have), _LENGTH.size) if end == _LENGTH.size
                           else (len(have) - _LENGTH.size, end - _LENGTH.size))
            raise TruncatedFrame(f"connection closed inside a frame ({part} of {whole} bytes)")
        have += chunk


def _read_exactly(sock: socket.socket, count: int, *, allow_eof: bool) -> bytes:
    first = sock.recv(count)
    if len(first) == count:  # nearly always: the whole of it came at once, kept without a copy
        return first
    chunks = bytearray(first)
    if not first:
        if allow_eof:
            raise ConnectionClosed()
        raise TruncatedFrame(f"connection closed inside a frame (0 of {count} bytes)")
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            if allow_eof and not chunks:
                raise ConnectionClosed()
            raise TruncatedFrame(f"connection closed inside a frame ({len(chunks)} of {count} bytes)")
        chunks += chunk
    return bytes(chunks)


def first_page(items: Iterable[T], budget: int = PAGE_BYTES) -> list[T]:
    """The leading items whose JSON fits ``budget`` together (at least one)."""
    page: list[T] = []
    used = 0
    for item in items:
        used += len(orjson.dumps(item))
        if page and used > budget:
            break
        page.append(item)
    return page
