"""What every enact actor shares: its context, counting, failure reporting."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import pykka

from enact.actors._asks import ActorUnavailable
from enact.actors._batching import Deferred
from enact.actors._idle_reads import ActorActivity, CountingInbox, IdleReads
from enact.actors._long_work import LongWork, WorkDone
from enact.actors._reply import Reply
from enact.cancellation import DAEMON_STOPPING
from enact.clock import REAL_CLOCK, Clock, Timer
from enact.config import DaemonSettings
from enact.errors import EnactError
from enact.fence import FencedError
from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, registration_of
from enact.messages.epoch import Fenced

if TYPE_CHECKING:
    from enact.actors._batching import WriteBatch
    from enact.actors._pool import KeyedPool
    from enact.actors.supervisor import ActorSlot, ActorSpec
    from enact.cancellation import CancellationToken
    from enact.config import Config
    from enact.fence import Fence
    from enact.metrics import Metrics
    from enact.storage import Store

log = logging.getLogger(__name__)

_PRUNE_OWED_AT = 64


class UnknownMessage(EnactError, TypeError):
    """An actor got a message it has no handler for: a bug in the sender."""

    def __init__(self, actor: str, message: object) -> None:
        super().__init__(f"actor {actor!r} does not handle {type(message).__qualname__}")


R = TypeVar("R")
T = TypeVar("T")


class ActorSystem(Protocol):
    """What an actor may do with the others: address them by name, start
    keyed children, publish events. The Supervisor is the implementation; an
    actor never holds another's ref, since a restarted actor is a new one."""

    @property
    def stopping(self) -> bool: ...

    @property
    def stopping_token(self) -> CancellationToken:
        """Cancelled when the daemon starts a graceful stop (reason
        ``DAEMON_STOPPING``) or is fenced (the fence's reason)."""
        ...

    def ask(self, name: str, message: Request[R], *, timeout: float) -> R: ...

    def tell(self, name: str, message: object, *, wait_s: float = ...) -> None:
        """Tell ``name``; one that failed is waited for up to ``wait_s`` (by
        default its longest restart back-off) to come back."""
        ...

    def spawn(self, spec: ActorSpec, *, family: str) -> None: ...

    def retire(self, name: str) -> None: ...

    def pool(self, family: str, spec_of: Callable[[str], ActorSpec], *, idle_s: float) -> KeyedPool: ...

    def publish(self, event: object) -> None: ...

    def report_failure(self, name: str, ref: pykka.ActorRef[Any] | None, error: BaseException | None) -> None: ...

    def ended(self, name: str, ref: pykka.ActorRef[Any], *, started: bool) -> None:
        """The actor's thread is ending and no failure of it was reported;
        ``started``: its ``on_start`` had run."""
        ...


@dataclass(frozen=True, slots=True)
class ActorContext:
    """Everything an actor may use: its own store, and other actors by name."""

    name: str
    home: Path
    config: Config
    metrics: Metrics
    supervisor: ActorSystem
    fence: Fence
    store: Store | None
    slot: ActorSlot
    clock: Clock = REAL_CLOCK
    """What the actor reads the time and sets its timers by (enact.clock)."""
    activity: ActorActivity = field(default_factory=ActorActivity)
    """Its supervisor's count of what its actors did (``enact.actors._idle_reads``)."""

    def ask(self, actor: str, message: Request[R], timeout: float | None = None) -> R:
        """Ask another actor by name for the reply ``message`` declares; by
        default wait no longer than the control socket would
        (``control.request_timeout_s``). Raises ActorUnavailable, FencedError
        or UnexpectedReply."""
        if timeout is None:
            timeout = self.config.typed(DaemonSettings).request_timeout_s
        return self.supervisor.ask(actor, message, timeout=timeout)

    def tell(self, actor: str, message: object) -> None:
        self.supervisor.tell(actor, message)

    def publish(self, event: object) -> None:
        """Tell ``event`` to every actor subscribed to its type."""
        self.supervisor.publish(event)

    def own_store(self) -> Store:
        if self.store is None:
            raise RuntimeError(f"actor {self.name!r} was started without databases")
        return self.store


class _Started:
    """The supervisor asks this right after starting an actor. pykka runs
    ``on_start`` in the actor's thread before its first message, so the reply
    means ``on_start`` is done; a dead actor means it failed."""


STARTED = _Started()


def message_label(message: object) -> str:
    registration = registration_of(type(message))
    return registration.name if registration is not None else type(message).__name__


class EnactActor(pykka.ThreadingActor):
    """Base of every actor: subclasses implement ``handle`` with ``match``."""

    # The supervisor stops actors in order with a deadline; a thread that
    # overruns it must not keep the process alive after the daemon exits.
    use_daemon_thread = True

    def __init__(self, context: ActorContext) -> None:
        self.context = context  # first: pykka's __init__ makes the mailbox, which counts in its activity
        super().__init__()
        metrics = context.metrics
        self._tally = metrics.actor_messages.tally(context.slot.family)
        # Set by actors that group their writes (see _batching).
        self.batch: WriteBatch | None = None
        self._callback_errors_seen = 0
        # Replies handed out as Deferred and not yet answered: what this
        # actor owes, failed at once if it fails or stops.
        self._owed: list[Deferred] = []
        self._timers: dict[object, Timer] = {}
        self._started = False
        """Its ``on_start`` ran (the supervisor's STARTED was handled)."""
        self._failure_reported = False
        running = metrics.long_work.labels(actor=context.slot.family)
        self._long_work = LongWork(context.name, tell_back=self._tell_back, running=running.inc)
        inbox = cast(CountingInbox, self.actor_inbox)  # made by _create_actor_inbox below
        self.idle_reads = IdleReads(inbox, staged=lambda: self.batch is not None and self.batch.busy)
        """The read-only requests this actor answers from committed state in
        the asker's thread while it is idle (``enact.actors._idle_reads``):
        declared in ``__init__`` with ``self.idle_reads.declare``."""
        context.slot.idle_reads = self.idle_reads

    def _actor_loop(self) -> None:  # pykka's: the actor's whole life on its thread
        try:
            super()._actor_loop()
        finally:
            # However it ended (a stop nobody asked for, an ``on_start`` or
            # ``on_failure`` that raised), the supervisor hears of it now.
            self.context.activity.changed()  # stopped, and its mailbox emptied
            if not self._failure_reported:
                self.context.supervisor.ended(self.context.name, self.actor_ref, started=self._started)

    def _create_actor_inbox(self) -> Any:  # type: ignore[override]  # pykka's hook, a static method there
        return CountingInbox(self.context.activity)

    @staticmethod
    def _create_future() -> Any:  # pykka's hook for an ask's reply
        return Reply()

    def on_receive(self, message: Any) -> Any:
        self.context.activity.changed()  # taken from the mailbox: one fewer waiting
        try:
            return self._receive(message)
        finally:
            # Last, after the batch committed: an idle read may answer now.
            self.idle_reads.handled += 1
            self.context.activity.changed()  # and whatever handling it changed (a ledger it published)

    def _receive(self, message: Any) -> Any:
        if message is STARTED:
            self._started = True
            return None  # not counted: it is the supervisor's, not a caller's
        started = time.perf_counter()
        try:
            reply = self._long_work.done(message) if isinstance(message, WorkDone) else self.handle(message)
            if isinstance(reply, Deferred):
                self._owe(reply)
            return reply
        except FencedError as error:
            # Expected once another daemon took over: refuse, do not crash
            # (a restart would only be fenced again).
            log.warning("%s refused %s: %s", self.context.name, message_label(message), error)
            return Fenced(generation=error.generation, current_generation=error.current)
        except ActorUnavailable as error:
            if not self.context.supervisor.stopping:
                raise
            # The daemon is stopping and the actor this one needed is gone:
            # the work is left to the next start, which resumes it.
            log.info("%s left %s unfinished: %s (the daemon is stopping)", self.context.name,
                     message_label(message), error)
            return None
        finally:
            self._tally.count(message_label(message), time.perf_counter() - started)
            self.context.slot.handled += 1
            batch = self.batch
            if batch is not None:
                if batch.pending and (batch.full or self._mailbox_empty()):
                    batch.flush_idle()
                if batch.offered:
                    batch.settle()
            if batch is not None and batch.callback_errors != self._callback_errors_seen:
                errors = batch.callback_errors - self._callback_errors_seen
                self._callback_errors_seen = batch.callback_errors
                self.context.metrics.callback_errors.labels(actor=self.context.slot.family).inc(errors)

    def _mailbox_empty(self) -> bool:
        inbox: Any = self.actor_inbox  # a SimpleQueue (CountingInbox)
        return bool(inbox.empty())

    def tell_later(self, delay: float, message: object) -> None:
        """Tell this actor ``message`` after ``delay``, whichever incarnation
        of it runs then (it is addressed by name, as every caller does)."""
        # Keyed, not the timer itself: it may fire before call_later returns
        # it (then its entry lingers until cancel_timers, cancelling nothing).
        key = object()

        def fire() -> None:
            self._timers.pop(key, None)
            try:
                self.context.supervisor.tell(self.context.name, message, wait_s=0.0)
            except ActorUnavailable:
                if self.context.supervisor.stopping:
                    return
                # Failed and not restarted yet: the wait for the next
                # incarnation (its back-off, seconds) is not for the clock's
                # thread, which serves every timer of the process.
                threading.Thread(target=self._tell_once_back, args=(message,), daemon=True,
                                 name=f"enact-timer-{self.context.name}").start()

        self._timers[key] = self.context.clock.call_later(delay, fire)

    def _tell_once_back(self, message: object) -> None:
        with contextlib.suppress(ActorUnavailable):  # not back in time, or retired, or the daemon is stopping
            self.context.tell(self.context.name, message)

    def cancel_timers(self) -> None:
        """Drop every ``tell_later`` not yet told."""
        for timer in list(self._timers.values()):
            timer.cancel()
        self._timers.clear()

    def off_thread(self, work: Callable[[CancellationToken], T], *, then: Callable[[T], object],
                   failed: Callable[[Exception], object] | None = None, name: str = "work",
                   stop_waits: bool = False) -> None:
        """Run ``work(cancel)`` on a thread of its own; its result goes to
        ``then`` and its exception to ``failed`` (or, with none, to this
        actor's failure path), each on this actor's thread as a message of
        its own (``enact.actors._long_work``). ``cancel`` is cancelled when
        the daemon stops or is fenced and when this actor stops or fails;
        ``stop_waits``: this actor's stop waits for the work to end."""
        token = self.context.supervisor.stopping_token.child()
        self._long_work.start(work, then=then, failed=failed, token=token, name=name, stop_waits=stop_waits)

    @property
    def long_work_running(self) -> int:
        """Work started off this actor's thread whose outcome it has not handled yet."""
        return self._long_work.running

    def _tell_back(self, done: WorkDone) -> None:
        # This incarnation's own ref: a restarted actor never gets the
        # outcome of work its predecessor abandoned.
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(done)

    def _owe(self, reply: Deferred) -> None:
        if len(self._owed) >= _PRUNE_OWED_AT:
            self._owed = [owed for owed in self._owed if not owed.done]
        self._owed.append(reply)

    def _fail_what_is_owed(self, why: str) -> None:
        error = ActorUnavailable(why)
        if self.batch is not None:
            self.batch.abandon(error)
        for owed in self._owed:
            owed.fail(error)
        self._owed.clear()

    def on_stop(self) -> None:
        stopping = self.context.supervisor.stopping
        self._long_work.abandon(DAEMON_STOPPING if stopping else f"actor {self.context.name!r} stopped", wait=True)
        if self.batch is not None:
            self.batch.flush()
        self._fail_what_is_owed(f"actor {self.context.name!r} stopped before it answered")
        self.context.metrics.actor_messages.retire(self._tally)

    def handle(self, message: Any) -> Any:
        raise UnknownMessage(self.context.name, message)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        log.error("actor %s failed: %r", self.context.name, exception_value)
        self._long_work.abandon(f"actor {self.context.name!r} failed", wait=False)
        # Whoever waits on this actor hears it now, not at their deadline.
        self._fail_what_is_owed(f"actor {self.context.name!r} failed: {exception_value!r}")
        self.context.metrics.actor_messages.retire(self._tally)
        self.context.supervisor.report_failure(self.context.name, self.actor_ref, exception_value)
        self._failure_reported = True

