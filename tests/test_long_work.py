"""Long work off an actor's thread (``EnactActor.off_thread``), in process with
a real supervisor, storage and fence: the outcome is handled and committed
on the actor's thread, an exception goes to ``failed`` or else fails the
actor like a handler's, and a stop cancels the work (and waits for the work
that asks it to). Every wait is on an event the work or the actor sets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import WriteBatch
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.cancellation import DAEMON_STOPPING, CancellationToken
from enact.config import load
from enact.fence import Fence
from enact.messages import Request
from enact.metrics import Metrics
from enact.storage import Storage

WAIT_S = 10.0
DATABASE = "waiter.outcomes"


@dataclass(frozen=True)
class Begin(Request["None"]):
    """Start work that waits for ``release`` (or its cancel), then returns ``value`` or raises ``error``."""

    release: threading.Event
    value: str = ""
    error: str = ""
    handle_errors: bool = True
    stop_waits: bool = False


@dataclass(frozen=True)
class Stored(Request["list[str]"]):
    pass


@dataclass(frozen=True)
class Break:
    """Told: the handler raises, and the actor fails."""


@dataclass
class Seen:
    """What the test watches, shared with every incarnation of the actor."""

    handled: threading.Event = field(default_factory=threading.Event)
    actor_threads: list[str] = field(default_factory=list)
    outcome_threads: list[str] = field(default_factory=list)
    work_threads: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    work_ended: threading.Event = field(default_factory=threading.Event)
    incarnations: int = 0
    restarted: threading.Event = field(default_factory=threading.Event)


class Waiter(EnactActor):
    def __init__(self, context: ActorContext, *, seen: Seen) -> None:
        super().__init__(context)
        self.seen = seen
        self.batch = WriteBatch(context.own_store(), owner=context.name)
        self._table = context.own_store().table(DATABASE)

    def on_start(self) -> None:
        self.seen.incarnations += 1
        if self.seen.incarnations > 1:
            self.seen.restarted.set()

    def handle(self, message: Any) -> Any:
        match message:
            case Begin():
                self.seen.actor_threads.append(threading.current_thread().name)
                self.off_thread(lambda cancel: self._work(message, cancel), then=self._done,
                                failed=self._failed if message.handle_errors else None, name="wait",
                                stop_waits=message.stop_waits)
                return None
            case Break():
                raise RuntimeError("a defect in a handler")
            case Stored():
                return self.context.own_store().read(
                    lambda txn: [str(document["text"]) for _, document in self._table.items(txn)])
        return super().handle(message)

    def _work(self, message: Begin, cancel: CancellationToken) -> str:
        self.seen.work_threads.append(threading.current_thread().name)
        cancel.on_cancel(lambda _: message.release.set())  # woken by the release or the cancel
        try:
            message.release.wait()
            if cancel.cancelled:
                self.seen.cancelled.append(cancel.reason)
                return "cancelled"
            if message.error:
                raise ValueError(message.error)
            return message.value
        finally:
            self.seen.work_ended.set()

    def _done(self, value: str) -> None:
        self._outcome(f"done: {value}")

    def _failed(self, error: Exception) -> None:
        self._outcome(f"failed: {error}")

    def _outcome(self, text: str) -> None:
        self.seen.outcome_threads.append(threading.current_thread().name)
        key = f"{len(self.seen.outcome_threads):04d}".encode()
        # Staged: committed by the flush after this message, as any handler's write is.
        assert self.batch is not None
        self.batch.stage(lambda txn: self._table.put(txn, key, {"text": text}),
                         lambda _: self.seen.handled.set())


@dataclass
class Home:
    home: Path
    storage: Storage
    fence: Fence
    metrics: Metrics
    seen: Seen
    supervisor: Supervisor

    def running(self) -> float | None:
        return self.metrics.registry.get_sample_value("enact_actor_long_work", {"actor": "waiter"})


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    storage = Storage(tmp_path / "state", map_size=1 << 20)
    fence = Fence(tmp_path, storage)
    fence.acquire(takeover=False)
    metrics, seen = Metrics(), Seen()
    spec = ActorSpec(name="waiter", actor=Waiter, databases=(DATABASE,), options={"seen": seen})
    supervisor = Supervisor([spec], home=tmp_path, config=load(tmp_path, environ={}), metrics=metrics,
                            storage=storage, fence=fence, on_fatal=lambda why: None)
    supervisor.start()
    try:
        yield Home(tmp_path, storage, fence, metrics, seen, supervisor)
    finally:
        supervisor.stop(timeout=WAIT_S)
        fence.release()
        storage.close()


def test_the_result_is_handled_and_committed_on_the_actors_thread(home: Home) -> None:
    release = threading.Event()
    home.supervisor.ask("waiter", Begin(release=release, value="42"), timeout=WAIT_S)
    assert home.running() == 1
    assert home.supervisor.ask("waiter", Stored(), timeout=WAIT_S) == []  # the actor answers meanwhile
    release.set()
    assert home.seen.handled.wait(WAIT_S)
    assert home.supervisor.ask("waiter", Stored(), timeout=WAIT_S) == ["done: 42"]
    assert home.seen.outcome_threads == home.seen.actor_threads
    assert home.seen.work_threads != home.seen.actor_threads
    assert home.running() == 0
    counted = home.metrics.registry.get_sample_value("enact_actor_messages_total",
                                                     {"actor": "waiter", "type": "WorkDone"})
    assert counted == 1


def test_an_exception_goes_to_failed_on_the_actors_thread(home: Home) -> None:
    release = threading.Event()
    home.supervisor.ask("waiter", Begin(release=release, error="the model broke"), timeout=WAIT_S)
    release.set()
    assert home.seen.handled.wait(WAIT_S)
    assert home.supervisor.ask("waiter", Stored(), timeout=WAIT_S) == ["failed: the model broke"]
    assert home.seen.outcome_threads == home.seen.actor_threads


def test_an_exception_with_no_failed_fails_the_actor_which_is_restarted(home: Home) -> None:
    release = threading.Event()
    home.supervisor.ask("waiter", Begin(release=release, error="a defect", handle_errors=False), timeout=WAIT_S)
    release.set()
    assert home.seen.restarted.wait(WAIT_S)
    assert home.seen.outcome_threads == []
    assert home.metrics.registry.get_sample_value("enact_actor_restarts_total", {"actor": "waiter"}) == 1


def test_a_stop_cancels_running_work_and_drops_its_outcome(home: Home) -> None:
    home.supervisor.ask("waiter", Begin(release=threading.Event(), value="never"), timeout=WAIT_S)
    home.supervisor.stop(timeout=WAIT_S)
    assert home.seen.work_ended.wait(WAIT_S)
    assert home.seen.cancelled == [DAEMON_STOPPING]
    assert home.seen.outcome_threads == []


def test_a_stop_waits_for_work_that_asks_it_to(home: Home) -> None:
    home.supervisor.ask("waiter", Begin(release=threading.Event(), value="x", stop_waits=True), timeout=WAIT_S)
    home.supervisor.stop(timeout=WAIT_S)
    assert home.seen.work_ended.is_set()  # already: the stop returned only after the work ended
    assert home.seen.cancelled == [DAEMON_STOPPING]
    assert home.running() == 0


def test_work_of_an_actor_that_fails_is_cancelled_and_its_outcome_never_reaches_the_restarted_one(
        home: Home) -> None:
    release = threading.Event()
    home.supervisor.ask("waiter", Begin(release=release, value="stale"), timeout=WAIT_S)
    home.supervisor.tell("waiter", Break())
    assert home.seen.restarted.wait(WAIT_S)
    assert home.seen.work_ended.wait(WAIT_S)
    assert home.seen.cancelled == ["actor 'waiter' failed"]
    assert home.supervisor.ask("waiter", Stored(), timeout=WAIT_S) == []
    assert home.seen.outcome_threads == []
