"""Time as an argument: the clock an actor reads and sets its timers by.

Actors read the time and arm timers only through the clock in their context
(``ActorContext.clock``), never through ``time`` directly, so a test can run
the real actors on a ``ManualClock`` and move time on by hand instead of
waiting for it. The daemon runs on ``REAL_CLOCK``. Waits that bound real
work (an ask's timeout, a subprocess's deadline, a stop's grace) are about
threads and processes, not about the clock, and stay real.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)


class Timer(Protocol):
    """An action set to run later; cancelling it after it ran does nothing."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Wall time, seconds since the epoch: what records and schedules store."""
        ...

    def monotonic(self) -> float:
        """Seconds that only ever grow: for intervals and orderings in one process."""
        ...

    def call_later(self, delay: float, action: Callable[[], None]) -> Timer:
        """Run ``action`` once ``delay`` seconds have passed, on a thread of
        the clock's own (it must not block: an actor's timer tells itself)."""
        ...


@dataclass(order=True)
class _Pending:
    due: float
    order: int
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class RealClock:
    """The machine's clock: ``time.time``, ``time.monotonic``, and timers
    served by one thread for the whole process (``_TimerThread``)."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, action: Callable[[], None]) -> Timer:
        return _TIMERS.add(delay, action)


class _TimerThread:
    """Every real timer of the process on one daemon thread (``enact-clock``),
    started on first use, which sleeps until the earliest due time or until
    a sooner timer is added. A thread per timer (``threading.Timer``) had
    made the idle daemon start and end a thread every second for each
    ticking actor, on the one CPU its threads share (``enact.one_cpu``).

    A cancelled timer stays in the heap, marked, until it comes up (its
    action is then skipped), so cancel takes no lock. An action that
    raises is logged and the thread serves the next one. Actions run one
    after another: one that blocked would hold up every later timer, which
    is why the protocol says they must not (an actor's timer only tells).

    The thread does not survive a ``fork``: the child gets a fresh heap
    and starts its own thread on its first timer, while its parent's
    timers, whose actors it does not run, are dropped (as a thread per timer
    had done). Nothing forks and then sets timers today: the command server
    forks for each command but runs no actors, and the daemon's programs
    start with ``exec``; the reset is there so a child that does need not know."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._due: list[_Pending] = []
        self._changed = threading.Condition(threading.Lock())
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, delay: float, action: Callable[[], None]) -> _Pending:
        pending = _Pending(due=time.monotonic() + max(0.0, delay), order=next(self._order), action=action)
        with self._changed:
            heapq.heappush(self._due, pending)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="enact-clock", daemon=True)
                self._thread.start()
            elif self._due[0] is pending:  # sooner than what the thread sleeps towards
                self._changed.notify()
        return pending

    def _serve(self) -> None:
        while True:
            action = self._next_due()
            try:
                action()
            except Exception:
                log.exception("a timer's action %r failed", action)

    def _next_due(self) -> Callable[[], None]:
        with self._changed:
            while True:
                while self._due and self._due[0].cancelled:
                    heapq.heappop(self._due)
                if not self._due:
                    self._changed.wait()
                    continue
                wait = self._due[0].due - time.monotonic()
                if wait <= 0:
                    return heapq.heappop(self._due).action
                self._changed.wait(wait)


_TIMERS = _TimerThread()
REAL_CLOCK = RealClock()


class ManualClock:
    """A clock that stands still until ``advance`` moves it: for tests.

    Wall and monotonic time move together. ``advance`` runs each timer that
    comes due on the calling thread, in due order, with the clock set to
    that timer's due time. An actor's timer only tells the actor a message:
    to know it was handled (and the actor's next timer armed), ask that
    actor anything afterwards, since its mailbox keeps order. So move time
    on in steps no longer than the interval under test, asking in between:
    a timer armed while ``advance`` runs may miss that ``advance``."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall = start
        self._since_start = 0.0
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._order = itertools.count()

    def time(self) -> float:
        with self._lock:
            return self._wall + self._since_start

    def monotonic(self) -> float:
        with self._lock:
            return self._since_start

    def call_later(self, delay: float, action: Callable[[], None]) -> Timer:
        with self._lock:
            pending = _Pending(due=self._since_start + max(0.0, delay), order=next(self._order), action=action)
            heapq.heappush(self._pending, pending)
        return pending

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``, running the timers that come due."""
        with self._lock:
            until = self._since_start + seconds
        while True:
            with self._lock:
                while self._pending and self._pending[0].cancelled:
                    heapq.heappop(self._pending)
                if not self._pending or self._pending[0].due > until:
                    self._since_start = until
                    return
                due = heapq.heappop(self._pending)
                self._since_start = max(self._since_start, due.due)
            due.action()
