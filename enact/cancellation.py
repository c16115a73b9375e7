"""Cancellation tokens that long calls (runtime calls, subprocesses) honour.

A token can have children: cancelling the daemon's root token (on shutdown or
when another daemon fences this one) cancels every call in flight.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from enact.errors import EnactError

DAEMON_STOPPING = "the daemon is stopping"
"""The reason a graceful stop gives the work it cancels (``Supervisor.stopping_token``)."""


class Cancelled(EnactError):
    """The work was cancelled; the reason says by whom."""


class CancellationToken:
    def __init__(self, parent: CancellationToken | None = None) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[str], None]] = []
        # Weak, so a finished call's token does not live as long as its parent.
        self._children: weakref.WeakSet[CancellationToken] = weakref.WeakSet()
        self.reason = ""
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: CancellationToken) -> None:
        with self._lock:
            if not self._event.is_set():
                self._children.add(child)
                return
        child.cancel(self.reason)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
            children = list(self._children)
        for child in children:
            child.cancel(reason)
        for callback in callbacks:
            # One call's failing clean-up must not leave the others running.
            try:
                callback(reason)
            except Exception:
                import logging  # here: every CLI command imports this module (through enact.runtime), none logs

                logging.getLogger(__name__).exception("a cancellation callback failed")

    def on_cancel(self, callback: Callable[[str], None]) -> None:
        """Run ``callback(reason)`` once on cancellation (at once if already)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback(self.reason)

    def child(self) -> CancellationToken:
        return CancellationToken(parent=self)

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout``; True if cancelled meanwhile."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled(self.reason)
