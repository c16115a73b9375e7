"""The control socket: the CLI's way into the running actors.

A Unix socket at ``<home>/control.sock`` (mode 0600, in a directory only the
owner can enter). Each request is one frame holding a typed message; each
answer is one frame holding its typed reply. Bad input gets a
``control.Error`` and the connection closes; the daemon and other clients
carry on. One thread serves each connection, so a slow request (``enact
send`` waiting for its reply) does not hold up anyone else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from enact.actors._asks import ActorNotFound, ActorUnavailable
from enact.actors.supervisor import Supervisor
from enact.fence import FencedError
from enact.home import SOCKET_NAME
from enact.messages import DecodeError, Kind, decode, encode
from enact.messages._framing import (
    MAX_FRAME_BYTES,
    ConnectionClosed,
    FrameError,
    FrameReader,
    time_out_blocking,
    write_frame,
)
from enact.messages._registry import Registration, registration_of
from enact.messages.common import HUMAN_CLI, Origin
from enact.messages.control import Error
from enact.messages.epoch import Fenced
from enact.metrics import Metrics
from enact.storage import DiskFull

log = logging.getLogger(__name__)
# sun_path holds 108 bytes including the terminating NUL on Linux.
MAX_SOCKET_PATH = 107
MAX_CONNECTIONS = 256

LocalHandler = Callable[[Any], Any]
"""Serves a request in the connection's own thread instead of an actor."""
FrameHandler = Callable[[Any], bytes]
"""Serves a request on the socket with its reply already encoded (``serve_frames``)."""


class _Encoded:
    """A reply a ``FrameHandler`` encoded itself, as it goes on the wire."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class ControlServer:
    def __init__(
        self,
        home: Path,
        supervisor: Supervisor,
        metrics: Metrics,
        *,
        idle_timeout_s: float,
        request_timeout_s: float,
        setting: Callable[[str], Any] | None = None,
    ) -> None:
        self.path = home / SOCKET_NAME
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            raise ValueError(f"control socket path is too long for a Unix socket ({self.path}); use a shorter home")
        self._supervisor = supervisor
        self._metrics = metrics
        self._idle_timeout_s = idle_timeout_s
        self._request_timeout_s = request_timeout_s
        self._setting = setting
        """The value of a setting by name: what a long request waits for (``Registration.long_wait``)."""
        self._local: dict[type[Any], LocalHandler] = {}
        self._frames: dict[type[Any], FrameHandler] = {}
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self._closing = threading.Event()
        self._stopping_because = ""
        self._busy = 0
        self._draining = False
        """Whether ``drain`` waits: only then does a request's end notify (a Python call on every request)."""
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        # A plain lock under the condition: counting a request in and out
        # takes it as a C-level context manager, where the condition's own
        # enter and exit are two Python calls each (four a request).
        self._counting = threading.Lock()
        self._idle = threading.Condition(self._counting)

    def serve_locally(self, message_type: type[Any], handler: LocalHandler) -> None:
        self._local[message_type] = handler

    def serve_frames(self, message_type: type[Any], handler: FrameHandler) -> None:
        """Answer ``message_type`` on the socket with the frame ``handler``
        encodes (``encode`` of the reply its local handler gives, which
        ``dispatch`` still asks): for a reply asked often that keeps most
        of its encoding from one request to the next (the status)."""
        self._frames[message_type] = handler

    # -- life cycle -------------------------------------------------------

    def start(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with _path_lock(directory):
            # Whoever calls start() holds the home (the epoch fence), so a
            # socket file already here is stale (kill -9) or an older daemon's
            # that was taken over: replace it.
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            previous = os.umask(0o177)
            try:
                listener.bind(str(self.path))
            finally:
                os.umask(previous)
            os.chmod(self.path, 0o600)
            self._inode = os.stat(self.path).st_ino
        listener.listen(MAX_CONNECTIONS)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="enact-control", daemon=True).start()

    def stop(self, because: str = "") -> None:
        """Stop listening; a request that arrives or fails from now on is
        answered that the daemon is stopping, and ``because``."""
        self._stopping_because = because
        self._closing.set()
        # Only our own socket: after a takeover the path is the new daemon's.
        # Checked before closing the listener, which keeps our inode in use so
        # that the new daemon's socket cannot be given the same number, and
        # under the lock, so that the new daemon cannot bind in between.
        if self._inode is not None:
            with _path_lock(self.path.parent):
                try:
                    if os.stat(self.path).st_ino == self._inode:
                        self.path.unlink()
                except FileNotFoundError:
                    pass
        if self._listener is not None:
            self._listener.close()

    def drain(self, timeout: float) -> None:
        """Wait for requests being answered to write their replies; idle
        connections are left to die with the process."""
        with self._idle:
            self._draining = True
            self._idle.wait_for(lambda: self._busy == 0, timeout)

    def _accept(self, listener: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            # One thread per connection; the cap keeps a runaway client from
            # exhausting threads while the others are still served.
            if not self._slots.acquire(blocking=False):
                connection.settimeout(1.0)
                self._refuse(connection, "too_many_connections", f"more than {MAX_CONNECTIONS} connections are open")
                connection.close()
                continue
            threading.Thread(target=self._serve, args=(connection,), name="enact-control-conn", daemon=True).start()

    # -- one connection ---------------------------------------------------

    def _serve(self, connection: socket.socket) -> None:
        time_out_blocking(connection, self._idle_timeout_s)
        try:
            self._serve_frames(connection)
        finally:
            self._slots.release()

    def _serve_frames(self, connection: socket.socket) -> None:
        # A client that polls sends the same frame again and again, and an
        # idle read answers it with the same reply while nothing changed:
        # each connection keeps its last request decoded and its last reply
        # encoded (requests and replies are frozen records).
        last_frame, last_request = b"", None
        last_reply, last_payload = None, b""
        incoming = FrameReader(connection)
        try:
            # No check of the stop before each read: a frame that comes after
            # a stop is always answered that the daemon is stopping (below),
            # wherever between frames its connection's thread happened to be.
            while True:
                try:
                    frame = incoming.read()
                except ConnectionClosed:
                    return
                except (TimeoutError, BlockingIOError):  # the latter: the kernel's timeout (time_out_blocking)
                    self._refuse(connection, "idle_timeout", "connection idle for too long")
                    return
                except FrameError as error:
                    self._refuse(connection, "bad_frame", str(error))
                    return
                if self._closing.is_set():  # its actors may be gone already
                    self._refuse(connection, "stopping", self._stopping())
                    return
                with self._counting:
                    self._busy += 1
                try:
                    if frame != last_frame or last_request is None:
                        last_request, last_frame = self._decoded(frame), frame
                    reply, keep_open = self._answer(last_request)
                    if type(reply) is _Encoded:
                        payload = reply.payload
                    elif reply is last_reply:
                        payload = last_payload
                    else:
                        payload = encode(reply)
                        last_reply, last_payload = reply, payload
                    if len(payload) > MAX_FRAME_BYTES:
                        payload, keep_open = self._too_large(reply, len(payload)), False
                    write_frame(connection, payload)
                finally:
                    self._done_one()
                if not keep_open:
                    return
        except OSError as error:
            log.debug("control connection ended: %s", error)
        finally:
            connection.close()

    def _done_one(self) -> None:
        with self._counting:
            self._busy -= 1
            if self._draining:
                self._idle.notify_all()

    def _refuse(self, connection: socket.socket, reason: str, text: str) -> None:
        self._metrics.control_errors.labels(reason=reason).inc()
        with contextlib.suppress(OSError):
            write_frame(connection, encode(Error(message=text)))

    def _too_large(self, reply: object, size: int) -> bytes:
        """A reply the frame cannot hold: paging and clipping keep answers
        under it, so this is a defect to fix, and the client is told so in
        one line instead of a connection closed without a word."""
        registration = registration_of(type(reply))
        name = registration.name if registration else type(reply).__name__
        text = f"the reply ({name}) is {size} bytes, over the {MAX_FRAME_BYTES}-byte frame; ask for less"
        log.error("%s", text)
        self._metrics.control_errors.labels(reason="reply_too_large").inc()
        return encode(Error(message=text))

    def _decoded(self, frame: bytes) -> object:
        """The request a frame holds, or the ``DecodeError`` that says why it holds none."""
        try:
            return decode(frame)
        except DecodeError as error:
            return error

    def _answer(self, message: object) -> tuple[object, bool]:
        """The reply to one decoded frame, and whether the connection stays open."""
        if isinstance(message, DecodeError):
            self._metrics.control_errors.labels(reason="bad_message").inc()
            return Error(message=str(message)), False
        registration = registration_of(type(message))
        if registration is None or registration.kind is not Kind.REQUEST:
            self._metrics.control_errors.labels(reason="not_a_request").inc()
            name = registration.name if registration else type(message).__name__
            return Error(message=f"{name} is not a request that can be sent to the daemon"), False
        return self._answer_request(_stamp_origin(message, HUMAN_CLI), registration, on_socket=True)

    def dispatch(self, message: Any, origin: Origin) -> object:
        """Answer one typed request as a frame on the socket is answered,
        stamped with ``origin``: how a component's service (the console)
        reaches the actors, through the requests the CLI sends. A request
        the wire would refuse is answered ``control.Error``."""
        registration = registration_of(type(message))
        if registration is None or registration.kind is not Kind.REQUEST:
            return Error(message=f"{type(message).__name__} is not a request that can be sent to the daemon")
        if self._closing.is_set():
            return Error(message=self._stopping())
        with self._counting:
            self._busy += 1
        try:
            reply, _ = self._answer_request(_stamp_origin(message, origin), registration)
        finally:
            self._done_one()
        return reply

    def _answer_request(self, message: Any, registration: Registration, *, on_socket: bool = False
                        ) -> tuple[object, bool]:
        try:
            reply = self._route(message, registration, on_socket)
        except ActorUnavailable as error:
            if self._closing.is_set():  # stopped under the request: say so, not which actor went
                self._metrics.control_errors.labels(reason="stopping").inc()
                return Error(message=self._stopping()), False
            reason = "no_actor" if isinstance(error, ActorNotFound) else "unavailable"
            log.warning("%s: %s", registration.name, error)
            self._metrics.control_errors.labels(reason=reason).inc()
            return Error(message=str(error)), False
        except DiskFull as error:  # the owner's to fix, not a defect: one line, no traceback
            log.warning("%s: %s", registration.name, error)
            self._metrics.control_errors.labels(reason="disk_full").inc()
            return Error(message=str(error)), False
        except FencedError as error:
            # Expected once another daemon took over: a refusal, not a defect.
            log.warning("refused %s: %s", registration.name, error)
            self._metrics.control_errors.labels(reason="fenced").inc()
            return Fenced(generation=error.generation, current_generation=error.current), False
        except Exception as error:  # an actor's defect must not end the server
            log.exception("request %s failed", registration.name)
            self._metrics.control_errors.labels(reason="failed").inc()
            return Error(message=f"{registration.name} failed: {type(error).__name__}: {error}"), False
        if type(reply) is not _Encoded and registration_of(type(reply)) is None:
            return Error(message=f"{registration.name} produced no typed reply"), False
        return reply, True

    def _stopping(self) -> str:
        because = f" ({self._stopping_because})" if self._stopping_because else ""
        return f"the daemon (pid {os.getpid()}) is stopping{because}; try again"

    def _route(self, message: object, registration: Registration, on_socket: bool) -> object:
        if on_socket:
            framed = self._frames.get(type(message))
            if framed is not None:
                return _Encoded(framed(message))
        handler = self._local.get(type(message))
        if handler is not None:
            return handler(message)
        # Only here: what an actor's reply is waited for means nothing to the others.
        timeout_s = wait_s(registration.long_wait, self._request_timeout_s, self._setting)
        return self._supervisor.call(registration.actor, message, timeout=timeout_s)


def wait_s(long_wait: str, request_timeout_s: float, setting: Callable[[str], Any] | None) -> float:
    """How long a request's reply is waited for: the request timeout, and
    for a long request (``Registration.long_wait``) the setting that bounds
    its work on top."""
    if not long_wait or setting is None:
        return request_timeout_s
    try:
        return request_timeout_s + float(setting(long_wait))
    except (KeyError, TypeError, ValueError):  # not a setting of this daemon's: the plain timeout
        return request_timeout_s


_HAS_ORIGIN: dict[type[Any], bool] = {}


def _stamp_origin(message: Any, origin: Origin) -> Any:
    """Whoever reaches the 0600 socket is the owner at a shell: ``human-cli``,
    whatever origin the frame claimed (the console's requests: ``human-console``)."""
    has_origin = _HAS_ORIGIN.get(type(message))
    if has_origin is None:
        has_origin = _HAS_ORIGIN[type(message)] = any(f.name == "origin" for f in dataclasses.fields(message))
    if has_origin and message.origin != origin:
        return dataclasses.replace(message, origin=origin)
    return message


@contextlib.contextmanager
def _path_lock(directory: Path) -> Iterator[None]:
    """Serialise replacing and removing the socket path across processes: in
    a takeover the new daemon binds while the old one is stopping."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock

