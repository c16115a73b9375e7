"""Long work off an actor's thread, its outcome handled back on it.

An actor must answer while a model thinks, a doctor runs or another actor
takes its time; so such work runs on a thread of its own
(``EnactActor.off_thread``), and its result, or its exception, comes back to
the actor as a message (``WorkDone``). ``then(result)`` or
``failed(error)`` runs there, on the actor's thread, like any handler: its
writes are the actor's and are committed as a handler's are, and what it
raises takes the path a told handler's error takes (the actor fails and is
restarted). An error with no ``failed`` is raised there the same way. The
work itself only computes and asks; it never writes the actor's tables.

Each piece of work gets a cancellation token, a child of the daemon's
stopping token (cancelled by a graceful stop or a fence), which is also
cancelled when its actor stops or fails: work that is still running then
is abandoned and its outcome dropped. A stop waits for the work that asks
it (``stop_waits``: a task attempt, whose hand-back the queue must get).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from enact.cancellation import CancellationToken
from enact.frozen_dataclass import dataclass

log = logging.getLogger(__name__)

T = TypeVar("T")


class OffThread(Protocol):
    """Run ``work(cancel)`` off the caller's thread; then ``then(result)`` or
    ``failed(error)`` on it. ``EnactActor.off_thread`` is the one the daemon
    uses; ``run_inline`` runs it all at once, for plain parts driven without
    an actor."""

    def __call__(self, work: Callable[[CancellationToken], T], *, then: Callable[[T], object],
                 failed: Callable[[Exception], object] | None = None) -> None: ...


def run_inline(work: Callable[[CancellationToken], T], *, then: Callable[[T], object],
               failed: Callable[[Exception], object] | None = None) -> None:
    """``work``, then ``then`` or ``failed``, here and now (an ``OffThread``
    for the plain parts in tests, which drive a chain without threads)."""
    try:
        result = work(CancellationToken())
    except Exception as error:
        if failed is None:
            raise
        failed(error)
        return
    then(result)


class Job(Generic[T]):
    """One piece of long work: its token, and what runs with its outcome."""

    def __init__(self, name: str, token: CancellationToken, then: Callable[[T], object],
                 failed: Callable[[Exception], object] | None, stop_waits: bool) -> None:
        self.name = name
        self.token = token
        self.then = then
        self.failed = failed
        self.stop_waits = stop_waits
        self.thread: threading.Thread | None = None


@dataclass(frozen=True, slots=True, eq=False)
class WorkDone:
    """Told by a job's thread to its own actor: the outcome of the work."""

    job: Job[Any]
    result: Any
    error: Exception | None


class LongWork:
    """An actor's long work in flight. Started and finished on the actor's
    thread; only the work runs elsewhere."""

    def __init__(self, owner: str, *, tell_back: Callable[[WorkDone], None],
                 running: Callable[[int], None]) -> None:
        self._owner = owner
        self._tell_back = tell_back
        self._running = running
        """Called with +1 when a job starts and -1 when its work ends (the gauge)."""
        self._jobs: set[Job[Any]] = set()

    @property
    def running(self) -> int:
        """Jobs started whose outcome was not handled yet."""
        return len(self._jobs)

    def start(self, work: Callable[[CancellationToken], T], *, then: Callable[[T], object],
              failed: Callable[[Exception], object] | None, token: CancellationToken, name: str,
              stop_waits: bool) -> None:
        job: Job[T] = Job(name, token, then, failed, stop_waits)

        def run() -> None:
            try:
                done = WorkDone(job, work(token), None)
            except Exception as error:  # the actor's thread decides what it means
                done = WorkDone(job, None, error)
            finally:
                self._running(-1)
            self._tell_back(done)

        job.thread = threading.Thread(target=run, name=f"enact-{self._owner}-{name}", daemon=True)
        self._jobs.add(job)
        self._running(1)
        job.thread.start()

    def done(self, message: WorkDone) -> object:
        """On the actor's thread: hand the outcome to ``then`` or ``failed``."""
        job = message.job
        if job not in self._jobs:
            return None  # abandoned at a stop of this actor
        self._jobs.discard(job)
        if message.error is None:
            return job.then(message.result)
        if job.failed is None:
            raise message.error
        return job.failed(message.error)

    def abandon(self, reason: str, *, wait: bool) -> None:
        """Cancel every job; with ``wait``, let those that ask for it end
        first (their outcomes are dropped all the same)."""
        jobs, self._jobs = list(self._jobs), set()
        for job in jobs:
            job.token.cancel(reason)
        if not wait:
            return
        for job in jobs:
            if job.stop_waits and job.thread is not None and job.thread is not threading.current_thread():
                log.info("%s: waiting for %s to end after its cancel (%s)", self._owner, job.name, reason)
                job.thread.join()

