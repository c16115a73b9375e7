"""A raw control-socket client for tests: frames built by hand, so the tests
check the daemon's wire behaviour without trusting enact's own client code."""

from __future__ import annotations

import dataclasses
import enum
import socket
import struct
import types
import typing
from pathlib import Path
from typing import Any

import orjson

from enact.home import SOCKET_NAME

LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 1 << 20


class RawClient:
    """One Unix-socket connection to ``<home>/control.sock``."""

    def __init__(self, home: Path, *, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(home / SOCKET_NAME))
        except OSError:
            self.sock.close()
            raise

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(LENGTH.pack(len(payload)) + payload)

    def send(self, document: object) -> None:
        self.send_frame(orjson.dumps(document))

    def recv_frame(self) -> bytes | None:
        """The next frame, or None if the daemon closed the connection cleanly."""
        header = self._read(LENGTH.size, allow_eof=True)
        if header is None:
            return None
        (length,) = LENGTH.unpack(header)
        assert length <= MAX_FRAME_BYTES, f"the daemon sent a frame of {length} bytes"
        body = self._read(length, allow_eof=False)
        assert body is not None
        return body

    def recv(self) -> dict[str, Any] | None:
        frame = self.recv_frame()
        if frame is None:
            return None
        document = orjson.loads(frame)
        assert isinstance(document, dict), document
        return document

    def ask(self, document: object) -> dict[str, Any]:
        self.send(document)
        reply = self.recv()
        assert reply is not None, f"the daemon closed the connection instead of answering {document!r}"
        return reply

    def assert_closed(self) -> None:
        """The daemon has closed its end: the next read is end-of-file (or a
        reset, when it hung up with input of ours still unread)."""
        try:
            frame = self.recv_frame()
        except ConnectionResetError:
            return
        assert frame is None, f"expected the connection to be closed, got another frame: {frame!r}"

    def _read(self, count: int, *, allow_eof: bool) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                if allow_eof and not chunks:
                    return None
                raise AssertionError(f"connection closed inside a frame ({len(chunks)} of {count} bytes)")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def status_frame() -> dict[str, Any]:
    return {"type": "control.Status", "body": {}}


def example_value(hint: Any) -> Any:
    """A small wire value that decodes as ``hint`` (for data-driven tests)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        return None if type(None) in options else example_value(options[0])
    if origin is typing.Literal:
        return typing.get_args(hint)[0]
    if hint is type(None):
        return None
    if hint is bool:
        return True
    if hint is int:
        return 1
    if hint is float:
        return 1.0
    if hint is str:
        return "x"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint)).value
    if origin in (list, tuple):
        return []
    if origin is dict:
        return {}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return example_body(hint)
    raise TypeError(f"no example for {hint!r}; teach example_value about it")


def example_body(cls: type[Any], **overrides: Any) -> dict[str, Any]:
    """A body with every field of ``cls`` filled with an example value."""
    hints = typing.get_type_hints(cls)
    body = {f.name: example_value(hints[f.name]) for f in dataclasses.fields(cls)}
    body.update(overrides)
    return body
