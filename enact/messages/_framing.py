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
