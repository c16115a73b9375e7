"""One reply, handed from the thread that answers to the thread that waits.

An ask's reply and a ``Deferred`` are each set once and read by the one
caller that waits. A lock taken at birth and released when the reply is set
is all that needs: pykka's ``ThreadingFuture`` and ``concurrent.futures.Future``
each build a condition variable (an RLock, a waiter lock per wait, a notify)
and about twenty Python calls around it, for every message that is asked.
"""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Any

import pykka

from enact.errors import EnactError


class ReplyTimeout(EnactError, pykka.Timeout, TimeoutError):
    """No reply within the time the caller gave: pykka's ``Timeout`` for an
    ask, a ``TimeoutError`` for a ``Deferred``."""


class Reply(pykka.Future[Any]):
    """What ``EnactActor`` hands pykka for each ask (``_create_future``), and
    what a ``Deferred`` is answered through: ``get``, ``set``,
    ``set_exception`` and a get hook (pykka's ``stop`` sets one)."""

    __slots__ = ("_claimed", "_done", "_error", "_ready", "_value")

    def __init__(self) -> None:
        super().__init__()
        self._ready = threading.Lock()
        self._ready.acquire()  # released once the reply is set
        self._claimed = itertools.count()  # its first number goes to the one setter (next() is atomic)
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done

    def set(self, value: Any = None) -> None:
        self._finish(value, None)

    def set_exception(self, exc_info: Any = None) -> None:
        exception_type, error, traceback = exc_info if exc_info is not None else sys.exc_info()
        if error is None and exception_type is not None:
            error = exception_type()
        if error is not None and traceback is not None and error.__traceback__ is not traceback:
            error = error.with_traceback(traceback)
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> bool:
        """Set the reply unless it was set already; whether this set it."""
        if next(self._claimed):
            return False
        self._value, self._error = value, error
        self._done = True
        self._ready.release()
        return True

    def get(self, *, timeout: float | None = None) -> Any:
        if self._get_hook is not None:  # pykka's stop() converts its reply through one
            return super().get(timeout=timeout)
        if not self._done:
            if not self._ready.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
                raise ReplyTimeout(f"{timeout} seconds")
            self._ready.release()  # set for good: any later get goes straight through
        if self._error is not None:
            raise self._error
        return self._value
