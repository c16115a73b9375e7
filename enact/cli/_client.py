"""Talking to the running daemon over its control socket.

``request`` returns the reply its request declares (``Request[R]``), checked
here once: a reply of another type is ``UnexpectedReply`` and a daemon taken
over is ``TakenOver``, so no command checks the type again. ``send`` is for
``enact call``, which prints whatever typed reply comes back.

The message modules are imported inside the calls: importing them registers
every wire type, which costs more than ``enact --version`` may take.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from enact.errors import EnactError
from enact.home import SOCKET_NAME

if TYPE_CHECKING:
    from collections.abc import Callable

    from enact.messages._registry import Request
    from enact.messages.control import StatusReport

T = TypeVar("T")
R = TypeVar("R")


def not_running_line(home: Path) -> str:
    """What every command says when no daemon runs on ``home``, and how to start one."""
    return f"enact is not running (home: {home}); start it with `enact daemon start`"


class NotRunning(EnactError, RuntimeError):
    """No daemon took the request: nothing listens on the socket, or the
    connection failed before the request was written."""

    def __init__(self, home: Path, text: str = "") -> None:
        super().__init__(text or not_running_line(home))
        self.home = home


class ConnectionLost(NotRunning):
    """The request was written, then the connection closed before a whole
    reply came back: the daemon stopped, crashed or was taken over while it
    worked on the request. Still a NotRunning, since whoever polls for a
    daemon sees none there; commands report it apart, because the request may
    have been taken (an ``enact send`` event is finished by the next daemon)."""

    def __init__(self, home: Path) -> None:
        super().__init__(home, f"the daemon closed the connection before it answered (home: {home})")


class DaemonError(EnactError, RuntimeError):
    """The daemon answered with ``control.Error``."""


class NoAnswer(DaemonError, TimeoutError):
    """The daemon took the request but did not answer in time (it is hung or
    stopped). A DaemonError, so commands report it in one line, and still the
    TimeoutError that callers polling for a daemon already expect."""

    def __init__(self, home: Path, timeout: float) -> None:
        super().__init__(f"the daemon did not answer within {timeout:g} s (home: {home})")
        self.home = home


class BadRequest(EnactError, ValueError):
    """The request cannot be sent as it is (text that is not UTF-8, a field
    over its limit, a frame over its size): the user's input, refused before
    it reaches the daemon, so nothing changes."""


class UnexpectedReply(DaemonError):
    """The daemon answered with a type the request does not declare (a daemon
    of another version, or a defect)."""


class TakenOver(DaemonError):
    """The daemon reached was fenced: another daemon took the home over
    (``epoch.Fenced``), so it did not act on the request."""

    def __init__(self, generation: int, current: int) -> None:
        super().__init__(f"the daemon reached (generation {generation}) was taken over by generation {current}; "
                         "try again")
        self.generation, self.current = generation, current


class _Wire:
    """The codec and framing, imported at the first request (not when the
    CLI starts) and kept: an import statement run inside a call costs about
    6,500 instructions every time, and a request ran seven."""

    def __init__(self) -> None:
        import orjson

        from enact.messages import DecodeError, decode, encode
        from enact.messages._framing import MAX_FRAME_BYTES, write_frame
        from enact.messages._registry import is_reply_to, registration_of

        self.encode_error = orjson.JSONEncodeError
        self.decode_error = DecodeError
        self.decode, self.encode = decode, encode
        self.max_frame_bytes = MAX_FRAME_BYTES
        self.write_frame = write_frame
        self.is_reply_to, self.registration_of = is_reply_to, registration_of


@functools.cache
def _wire() -> _Wire:
    return _Wire()


def _name_of(value: object) -> str:
    registration = _wire().registration_of(type(value))
    return registration.name if registration else type(value).__qualname__


def is_reply(reply: object, name: str) -> bool:
    """Whether ``reply`` is of the registered type ``name`` (``"epoch.Fenced"``),
    told without importing that type's protocol: decoding a reply loaded its
    own, and a command that only checks for another protocol's reply (every
    command checks for ``control.Error``) need not pay its start-up cost."""
    return _name_of(reply) == name


def expect(reply: object, expected: type[T], request: object) -> T:
    """``reply`` as ``expected``, or UnexpectedReply naming both types: for a
    reply that is one of a few its request declares, once the command has
    dealt with the others (its refusals)."""
    if isinstance(reply, expected):
        return reply
    raise UnexpectedReply(f"unexpected reply {_name_of(reply)} to {_name_of(request)}")


def checked_reply(message: Request[R], reply: object) -> R:
    """``reply`` as the type ``message`` declares, or the one error that says
    why it is not."""
    if _wire().is_reply_to(message, reply):
        return cast(R, reply)
    if is_reply(reply, "epoch.Fenced"):
        from enact.messages.epoch import Fenced

        if isinstance(reply, Fenced):
            raise TakenOver(reply.generation, reply.current_generation)
    raise UnexpectedReply(f"unexpected reply {_name_of(reply)} to {_name_of(message)}")


class Client:
    """One connection to the daemon; requests are answered in order."""

    def __init__(self, home: Path, *, timeout: float | None = 130.0,
                 decode_with: Callable[[bytes], object] | None = None) -> None:
        """``decode_with``: how a reply frame is decoded (``messages.decode``, strict, by default)."""
        self.home = home
        self._timeout = timeout
        self._decode_with = decode_with
        # A client that polls sends one request again and again, and gets the
        # same reply while nothing changed: the last frame checked and the
        # last reply decoded (a frozen record) are kept.
        self._last_checked = b""
        self._last_reply: tuple[bytes, object] | None = None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(str(home / SOCKET_NAME))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            self._sock.close()
            raise NotRunning(home) from None
        from enact.messages._framing import FrameReader, time_out_blocking

        # Connected: from now on the kernel times each receive and send out
        # (no poll before each), and a reply comes in with one receive.
        time_out_blocking(self._sock, timeout)
        self._replies = FrameReader(self._sock)

    def request(self, message: Request[R]) -> R:
        """The reply ``message`` declares; raises UnexpectedReply or TakenOver
        for any other, and the errors of ``send``."""
        return checked_reply(message, self.send(message))

    def send(self, message: object) -> object:
        """Any typed reply (``control.Error`` raised as DaemonError)."""
        frame = _encoded_frame(message)
        if frame != self._last_checked:  # the same bytes decode the same way: checked once
            _check_frame(frame)
            self._last_checked = frame
        return self.send_frame(frame)

    def send_frame(self, frame: bytes) -> object:
        """``send`` of a frame already encoded (and checked)."""
        wire = _wire()
        try:
            wire.write_frame(self._sock, frame)
        except (TimeoutError, BlockingIOError):  # the latter: the kernel's timeout (time_out_blocking)
            raise NoAnswer(self.home, self._timeout or 0.0) from None
        except ConnectionError as error:  # closed before it took the request
            raise NotRunning(self.home) from error
        try:
            reply_frame = self._replies.read()
            last = self._last_reply
            if last is not None and last[0] == reply_frame:
                reply = last[1]
            else:
                reply = (self._decode_with or wire.decode)(reply_frame)
                self._last_reply = (reply_frame, reply)
        except (TimeoutError, BlockingIOError):
            raise NoAnswer(self.home, self._timeout or 0.0) from None
        except (ConnectionError, EOFError) as error:  # EOFError: also gone in the middle of a reply
            raise ConnectionLost(self.home) from error
        if is_reply(reply, "control.Error"):
            from enact.messages.control import Error

            if isinstance(reply, Error):
                raise DaemonError(reply.message)
        return reply

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def checked_frame(message: object) -> bytes:
    """``message`` as the frame the daemon would accept, or BadRequest in one
    line naming the field: the daemon's own checks, run here, so that bad
    input is the user's error (exit 2) rather than the daemon's."""
    frame = _encoded_frame(message)
    _check_frame(frame)
    return frame


def _encoded_frame(message: object) -> bytes:
    """``message`` encoded, or BadRequest if it cannot be (text that is not
    UTF-8, a frame over its size)."""
    wire = _wire()
    try:
        frame = wire.encode(message)
    except wire.encode_error:  # looked into only then: the walk costs as much as the encoding
        bad = _not_utf8(message, "")
        if bad:
            raise BadRequest(f"{bad} is not valid UTF-8 text") from None
        raise
    if len(frame) > wire.max_frame_bytes:
        raise BadRequest(f"the request is {len(frame)} bytes; the daemon takes at most {wire.max_frame_bytes}")
    return frame


def _check_frame(frame: bytes) -> None:
    """BadRequest, naming the field, unless the daemon would decode ``frame``."""
    wire = _wire()
    try:
        wire.decode(frame)
    except wire.decode_error as error:
        raise BadRequest(str(error)) from None


def _not_utf8(value: object, path: str) -> str:
    """The first field holding text that cannot be written as UTF-8 (a shell
    argument of other bytes arrives as surrogates), or ""."""
    import dataclasses

    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"field {path!r}"
        return ""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: list[tuple[str, object]] = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    elif isinstance(value, (list, tuple)):
        items = [(str(index), item) for index, item in enumerate(value)]
    elif isinstance(value, dict):
        items = [(str(key), item) for key, item in value.items()]
    else:
        return ""
    for name, item in items:
        found = _not_utf8(item, f"{path}.{name}" if path else name)
        if found:
            return found
    return ""


def request(home: Path, message: Request[R], *, timeout: float | None = 130.0) -> R:
    with Client(home, timeout=timeout) as client:
        return client.request(message)


def full_status(home: Path, *, timeout: float | None = 5.0) -> StatusReport:
    """The daemon's full status, asked as every release takes it
    (``EVERY_RELEASES_STATUS``), so an older daemon still running on the
    home is seen; the errors of ``request``."""
    from enact.messages.control import EVERY_RELEASES_STATUS, Status

    with Client(home, timeout=timeout) as client:
        return checked_reply(Status(), client.send_frame(EVERY_RELEASES_STATUS))


def send(home: Path, message: object, *, timeout: float | None = 130.0) -> object:
    with Client(home, timeout=timeout) as client:
        return client.send(message)
