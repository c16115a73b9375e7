"""The supervisor: starts actors in dependency order, restarts the ones that
fail, stops them in reverse order, and lets callers address actors by name.

pykka has no supervision of its own: an actor whose ``tell`` handler raises is
stopped, and a restarted actor is a new ref. So nothing outside this module
holds an ``ActorRef``; everyone asks the supervisor by name.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pykka

from enact.actors._asks import ActorNotFound, ActorUnavailable, AskTimeout, checked_reply
from enact.actors._base import STARTED, ActorContext, message_label
from enact.actors._batching import Deferred
from enact.actors._idle_reads import NOT_IDLE, ActorActivity
from enact.actors._pool import KeyedPool
from enact.actors._roster import Roster, Summary, down
from enact.actors._specs import ActorSlot, ActorSpec, dependency_order
from enact.cancellation import DAEMON_STOPPING, CancellationToken
from enact.clock import REAL_CLOCK, Clock
from enact.config import DaemonSettings
from enact.errors import EnactError
from enact.messages._registry import Request
from enact.messages.control import ActorStatus

if TYPE_CHECKING:
    from enact.config import Config
    from enact.fence import Fence
    from enact.metrics import Metrics
    from enact.storage import Storage

log = logging.getLogger(__name__)

R = TypeVar("R")


_MAX_BACKOFF_S = 5.0
_START_TIMEOUT_S = 30.0


class ActorStartError(EnactError, RuntimeError):
    """An actor's ``on_start`` raised (pykka logs the traceback) and it stopped."""

    def __init__(self, name: str) -> None:
        super().__init__(f"actor {name} failed to start (its error is logged above)")


class Supervisor:
    def __init__(
        self,
        specs: Sequence[ActorSpec],
        *,
        home: Path,
        config: Config,
        metrics: Metrics,
        storage: Storage,
        fence: Fence,
        on_fatal: Callable[[str], None],
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self._home = home
        self.clock = clock
        self._config = config
        self._metrics = metrics
        self._storage = storage
        self._fence = fence
        self._on_fatal = on_fatal
        daemon_settings = config.typed(DaemonSettings)
        self._max_restarts = daemon_settings.max_restarts
        self._window_s = daemon_settings.restart_window_s
        self._order = dependency_order(specs)
        self._subscribers: dict[type[Any], tuple[tuple[str, Callable[[], bool] | None], ...]] = {}
        for spec in self._order:
            for event_type in spec.subscribes:
                self._subscribers[event_type] = (*self._subscribers.get(event_type, ()), (spec.name, spec.listening))
        self._slots: dict[str, ActorSlot] = {}
        self.activity = ActorActivity()
        """What its actors did, counted (``enact.actors._idle_reads``): a status gathers again only after it changed."""
        self._roster = Roster(self._slots, self.activity)
        """What status says of the actors; told of every change to a slot."""
        self._pools: dict[str, KeyedPool] = {}
        self._lock = threading.Lock()
        self._failures: queue.Queue[tuple[str, pykka.ActorRef[Any] | None, str] | None] = queue.Queue()
        """Actors to restart; None once the daemon stops, to end the watch."""
        self._stopped = threading.Event()
        self._stopping_token = fence.token.child()
        self._monitor = threading.Thread(target=self._watch, name="enact-supervisor", daemon=True)
        # Grant every store before anything starts, so a database claimed by
        # two actors stops the daemon at start-up rather than at run time.
        self._stores = {spec.name: storage.grant(spec.name, spec.databases) if spec.databases else None
                        for spec in self._order}
        for spec in self._order:
            if spec.prepare is not None and self._stores[spec.name] is None:
                raise ValueError(f"actor {spec.name} has something to prepare but no database to prepare it from")
        for spec in self._order:
            for family in spec.families:
                self._count_from_zero(family)

    # -- life cycle -------------------------------------------------------

    def start(self) -> None:
        for spec in self._order:
            store = self._stores[spec.name]
            if spec.prepare is not None and store is not None:
                spec.prepare(store)
        for spec in self._order:
            slot = ActorSlot(spec=spec, family=spec.name)
            self._slots[spec.name] = slot
            self._roster.changed()
            self._start(slot)
        self._monitor.start()

    def _start(self, slot: ActorSlot) -> None:
        context = ActorContext(
            name=slot.spec.name,
            home=self._home,
            config=self._config,
            metrics=self._metrics,
            supervisor=self,
            fence=self._fence,
            store=self._stores.get(slot.spec.name),
            slot=slot,
            clock=self.clock,
            activity=self.activity,
        )
        ref = slot.spec.actor.start(context, **slot.spec.options)
        with slot.changed:
            slot.ref = ref
            slot.changed.notify_all()
        self._roster.changed()
        # pykka.start returns before on_start has run in the actor's thread;
        # wait for it, so dependants start only after what they depend on.
        try:
            ref.ask(STARTED, timeout=_START_TIMEOUT_S)
        except pykka.ActorDeadError:
            raise ActorStartError(slot.spec.name) from None
        except pykka.Timeout:
            log.warning("actor %s is still starting after %g s", slot.spec.name, _START_TIMEOUT_S)

    def spawn(self, spec: ActorSpec, *, family: str) -> None:
        """Start a dynamic actor (one per conversation, say) unless it runs.

        The lock covers only the bookkeeping: an actor's ``on_start`` runs
        outside it, so a slow start never holds up everyone else's spawns."""
        with self._lock:
            slot = self._slots.get(spec.name)
            starting_elsewhere = slot is not None and slot.ref is None and not slot.stopping
            if slot is not None and (starting_elsewhere or (slot.ref is not None and slot.ref.is_alive())):
                mine = None
            else:
                mine = slot = ActorSlot(spec=spec, family=family)
                self._slots[spec.name] = slot
                self._roster.changed()
        if mine is not None:
            self._start(mine)
            return
        with slot.changed:  # another caller is starting it: wait for its ref
            slot.changed.wait_for(lambda: slot.ref is not None or slot.stopping, timeout=_START_TIMEOUT_S)

    def _count_from_zero(self, family: str) -> None:
        """Its restart and callback-error series exist, at 0, before its first
        incident: an alert's ``increase()`` sees only a series that existed."""
        self._metrics.restarts.labels(actor=family)
        self._metrics.callback_errors.labels(actor=family)

    def pool(self, family: str, spec_of: Callable[[str], ActorSpec], *, idle_s: float) -> KeyedPool:
        """The keyed pool of ``family``, made on first use. The same pool is
        returned to a restarted caller, with the work its children hold."""
        with self._lock:
            found = self._pools.get(family)
            if found is None:
                found = self._pools[family] = KeyedPool(self, family=family, spec_of=spec_of, idle_s=idle_s)
                self._count_from_zero(family)
            return found

    def retire(self, name: str) -> None:
        """Stop a dynamic actor and forget it (an idle conversation)."""
        with self._lock:
            slot = self._slots.pop(name, None)
        if slot is not None and slot.ref is not None:
            slot.stopping = True
            slot.ref.stop(block=False)
        self._roster.changed()

    def stop(self, timeout: float) -> None:
        """Stop every actor, last started first, within ``timeout`` in all."""
        self._stopped.set()
        self._failures.put(None)
        # Long work (a task attempt) hands its work back instead of holding
        # the stop up to the timeout.
        self._stopping_token.cancel(DAEMON_STOPPING)
        deadline = time.monotonic() + timeout
        with self._lock:
            dynamic = [s for name, s in self._slots.items() if name not in {sp.name for sp in self._order}]
            static = [self._slots[spec.name] for spec in reversed(self._order) if spec.name in self._slots]
        for slot in dynamic + static:
            slot.stopping = True
            self._roster.changed()
            if slot.ref is None:
                continue
            remaining = max(0.0, deadline - time.monotonic())
            try:
                slot.ref.stop(block=True, timeout=remaining)
            except pykka.Timeout:
                log.warning("actor %s did not stop within the shutdown timeout", slot.spec.name)
            except pykka.ActorDeadError:
                pass

    def halt(self, timeout: float) -> None:
        """Ask every actor to stop at once and wait at most ``timeout`` in all:
        for a fenced daemon, whose remaining work can only be refused."""
        self._stopped.set()
        self._failures.put(None)
        with self._lock:
            slots = list(self._slots.values())
        futures = []
        for slot in slots:
            slot.stopping = True
            self._roster.changed()
            if slot.ref is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    futures.append(slot.ref.stop(block=False))
        deadline = time.monotonic() + timeout
        busy = 0
        for future in futures:
            try:
                future.get(timeout=max(0.0, deadline - time.monotonic()))
            except pykka.Timeout:
                busy += 1
            except pykka.ActorDeadError:
                pass
        if busy:
            log.info("%d actor(s) were still finishing refused work; leaving them to the process exit", busy)

    # -- addressing -------------------------------------------------------

    def _current_ref(
        self, name: str, stale: pykka.ActorRef[Any] | None = None, wait_s: float = 0.0
    ) -> pykka.ActorRef[Any]:
        slot = self._slots.get(name)
        if slot is None:
            raise ActorNotFound(name)
        ref = slot.ref
        if ref is not None and ref is not stale:
            return ref
        deadline = time.monotonic() + wait_s
        with slot.changed:
            while slot.ref is None or slot.ref is stale:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or slot.stopping:
                    raise ActorNotFound(name)
                slot.changed.wait(remaining)
            return slot.ref

    @property
    def stopping(self) -> bool:
        """The daemon is stopping: actors that are gone are not coming back."""
        return self._stopped.is_set()

    @property
    def stopping_token(self) -> CancellationToken:
        return self._stopping_token

    def running(self, name: str) -> bool:
        """``name`` runs: its actor is alive and not being stopped (``spawn``
        would find it; a keyed pool tells it without making its spec)."""
        slot = self._slots.get(name)
        ref = slot.ref if slot is not None else None
        return ref is not None and not slot.stopping and ref.is_alive()  # type: ignore[union-attr]

    def has(self, name: str) -> bool:
        slot = self._slots.get(name)
        return slot is not None and slot.ref is not None and not slot.stopping

    def ask(self, name: str, message: Request[R], *, timeout: float) -> R:
        """Ask actor ``name``; returns the reply ``message`` declares or raises
        ActorUnavailable, FencedError or UnexpectedReply, within ``timeout``."""
        return checked_reply(message, self.call(name, message, timeout=timeout))

    def call(self, name: str, message: object, *, timeout: float) -> object:
        """Ask without checking the reply's type (the control socket forwards
        whatever the actor answered). One deadline covers the ask, a restart
        in between and the wait for a group commit."""
        slot = self._slots.get(name)
        if slot is not None and slot.idle_reads is not None and slot.ref is not None and slot.ref.is_alive():
            reply = slot.idle_reads.answer(message)
            if reply is not NOT_IDLE:
                self._count_idle_read(slot.family, message)
                return reply
        deadline = time.monotonic() + timeout

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        ref = self._current_ref(name)
        try:
            try:
                reply = ref.ask(message, timeout=remaining())
            except pykka.ActorDeadError:
                # The message was never handled: it reached a ref that had died.
                # Send it once more to the restarted actor.
                ref = self._current_ref(name, stale=ref, wait_s=min(remaining(), _MAX_BACKOFF_S * 2))
                reply = ref.ask(message, timeout=remaining())
            if isinstance(reply, Deferred):
                return reply.wait(remaining())  # answered once its group commit is durable
        except (pykka.Timeout, FutureTimeout):
            raise AskTimeout(name, message, timeout) from None
        except pykka.ActorDeadError:
            raise ActorUnavailable(f"actor {name!r} stopped before it answered") from None
        return reply

    def _count_idle_read(self, family: str, message: object) -> None:
        """Counted as a message the actor handled, as the ask would have been."""
        self._metrics.actor_messages.count_elsewhere(family, message_label(message))

    def tell(self, name: str, message: object, *, wait_s: float = _MAX_BACKOFF_S * 2) -> None:
        """Tell actor ``name``; one that failed is waited for up to ``wait_s``
        to come back (its restart's back-off) before ActorUnavailable."""
        ref = self._current_ref(name)
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            try:
                self._current_ref(name, stale=ref, wait_s=wait_s).tell(message)
            except pykka.ActorDeadError:
                raise ActorUnavailable(f"actor {name!r} stopped before it could be told") from None

    def publish(self, event: object) -> None:
        """Tell ``event`` to its subscribers. Told, never asked: a subscriber
        that asked its publisher back while the publisher waited would
        deadlock, so it reads whatever more it needs by cursor, later."""
        for name, listening in self._subscribers.get(type(event), ()):
            if listening is not None and not listening():
                continue
            try:
                self.tell(name, event)
            except ActorUnavailable:
                log.debug("event %s not told to %s: it is not running", type(event).__name__, name)

    # -- failures ---------------------------------------------------------

    def report_failure(self, name: str, ref: pykka.ActorRef[Any] | None, error: BaseException | None) -> None:
        self._failures.put((name, ref, repr(error)))

    def ended(self, name: str, ref: pykka.ActorRef[Any], *, started: bool) -> None:
        """Actor ``name``'s thread is ending and no failure was reported: one
        that nobody stopped (it stopped itself, its ``on_failure`` raised, its
        ``on_start`` did) is restarted like a failed one. Told by the actor's
        own thread, so the watch need not look for the dead."""
        slot = self._slots.get(name)
        if slot is not None and slot.ref is ref and not slot.stopping and not self._stopped.is_set():
            # One that failed to start is also reported by ``_start`` when it
            # is restarted: the same words, whichever is handled first.
            self._failures.put((name, ref, "stopped unexpectedly" if started else str(ActorStartError(name))))

    def _watch(self) -> None:
        while not self._stopped.is_set():  # set by a stop, or by a restart too many
            failure = self._failures.get()  # woken only for an actor to restart, or by the stop (None)
            if failure is None:
                return
            self._restart(*failure)

    def _restart(self, name: str, ref: pykka.ActorRef[Any] | None, reason: str) -> None:
        slot = self._slots.get(name)
        if slot is None or slot.stopping or self._stopped.is_set():
            return
        if ref is not None and slot.ref is not ref:
            return  # already restarted for this failure
        now = self.clock.monotonic()
        while slot.recent_restarts and now - slot.recent_restarts[0] > self._window_s:
            slot.recent_restarts.popleft()
        if len(slot.recent_restarts) >= self._max_restarts:
            why = (
                f"actor {name} failed again after {len(slot.recent_restarts)} restarts "
                f"within {self._window_s:g} s; last failure: {reason}"
            )
            log.critical("%s; stopping the daemon", why)
            self._stopped.set()
            self._on_fatal(why)
            return
        backoff = min(_MAX_BACKOFF_S, 0.05 * 2 ** len(slot.recent_restarts))
        log.warning("restarting actor %s in %.2f s after failure: %s", name, backoff, reason)
        if self._stopped.wait(backoff):
            return
        slot.recent_restarts.append(self.clock.monotonic())
        slot.restarts += 1
        self._roster.changed()
        self._metrics.restarts.labels(actor=slot.family).inc()
        try:
            self._start(slot)
        except ActorStartError as error:
            self._failures.put((name, slot.ref, str(error)))  # another failure, counted like any

    # -- status -----------------------------------------------------------

    def statuses(self) -> list[ActorStatus]:
        result = []
        for name, slot in sorted(self._slots.items()):
            ref = slot.ref
            alive = not down(slot)
            mailbox = _queued(ref) if ref is not None and alive else 0
            # The last one made, while it still holds: most actors are idle
            # between two status requests, and a record costs ~11k instructions.
            last = slot.reported
            if (last is None or last.alive is not alive or last.mailbox != mailbox or last.handled != slot.handled
                    or last.restarts != slot.restarts):
                last = slot.reported = ActorStatus(name=name, alive=alive, mailbox=mailbox, handled=slot.handled,
                                                   restarts=slot.restarts)
            result.append(last)
        return result

    def summary(self) -> Summary:
        """Every actor by name, those not running, and each restarted one's
        restarts and each one's waiting messages where not 0: what status
        says of the actors by default, without a record per actor. Asked on
        every status request (``enact.actors._roster``)."""
        return self._roster.summary()

    def mailbox_depths(self) -> dict[str, int]:
        """Queued messages per actor family (all conversations as one)."""
        depths: dict[str, int] = {}
        for slot in list(self._slots.values()):
            ref = slot.ref
            queued = _queued(ref) if ref is not None else 0
            depths[slot.family] = depths.get(slot.family, 0) + queued
        return depths


def _queued(ref: pykka.ActorRef[Any]) -> int:
    inbox: Any = ref.actor_inbox  # a SimpleQueue (enact.actors._idle_reads.CountingInbox)
    return int(inbox.qsize())  # C, taking no lock: status reads every actor's


__all__ = ["ActorSlot", "ActorSpec", "ActorStartError", "Supervisor"]
