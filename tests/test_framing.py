"""FrameReader: frames read from a connection with as few receives as
arrive, the same frames and errors as read_frame, over real socket pairs."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from enact.messages._framing import (
    RECEIVE_BYTES,
    ConnectionClosed,
    FrameError,
    FrameReader,
    TruncatedFrame,
    read_frame,
    time_out_blocking,
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.settimeout(10)
    with ours, theirs:
        yield ours, theirs


def _framed(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_frames_sent_in_one_write_are_read_one_after_another(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    theirs.sendall(_framed(b"first") + _framed(b"") + _framed(b"third"))
    reader = FrameReader(ours)
    assert [reader.read(), reader.read(), reader.read()] == [b"first", b"", b"third"]
    theirs.close()
    with pytest.raises(ConnectionClosed):
        reader.read()


def test_a_frame_longer_than_one_receive_is_read_whole_and_what_follows_it_kept(
        pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    first, second = b"a" * (RECEIVE_BYTES + 10), b"next"
    sending = threading.Thread(target=theirs.sendall, args=(_framed(first) + _framed(second),))
    sending.start()
    reader = FrameReader(ours)
    assert (reader.read(), reader.read()) == (first, second)
    sending.join()


def test_a_connection_closed_between_frames_is_closed_not_truncated(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    theirs.sendall(_framed(b"only"))
    theirs.close()
    reader = FrameReader(ours)
    assert reader.read() == b"only"
    with pytest.raises(ConnectionClosed):
        reader.read()


@pytest.mark.parametrize(("sent", "says"), [
    (b"\x00\x00", "(2 of 4 bytes)"),
    (_framed(b"abcdef")[:7], "(3 of 6 bytes)"),
])
def test_a_connection_closed_inside_a_frame_is_a_truncated_frame(
        pair: tuple[socket.socket, socket.socket], sent: bytes, says: str) -> None:
    ours, theirs = pair
    theirs.sendall(sent)
    theirs.close()
    with pytest.raises(TruncatedFrame) as raised:
        FrameReader(ours).read()
    assert str(raised.value) == f"connection closed inside a frame {says}"


def test_a_frame_over_the_limit_is_refused_from_its_length_alone(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    theirs.sendall(struct.pack(">I", 101) + b"a few bytes of its body")
    with pytest.raises(FrameError, match="frame of 101 bytes exceeds the limit of 100"):
        FrameReader(ours, max_bytes=100).read()


def test_a_reader_reads_what_read_frame_reads(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    payloads = [b"", b"{}", b"y" * 1000]
    for payload in payloads:
        theirs.sendall(_framed(payload))
    assert read_frame(ours) == payloads[0]
    reader = FrameReader(ours)
    assert [reader.read(), reader.read()] == payloads[1:]


def test_a_kernel_timed_socket_gives_up_a_receive_after_its_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    time_out_blocking(ours, 0.05)
    with pytest.raises(BlockingIOError):
        FrameReader(ours).read()
