"""Idle reads: a read an actor declares is answered in the asker's thread
while the actor has nothing to do, and by the actor, in mailbox order,
while it has."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from enact.actors._base import ActorContext, EnactActor
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.clock import ManualClock
from enact.config import load
from enact.fence import Fence
from enact.messages import Request
from enact.metrics import Metrics
from enact.storage import Storage

DATABASE = "keeper.data"


@dataclass(frozen=True)
class Keep(Request["None"]):
    value: str


@dataclass(frozen=True)
class Kept(Request["str"]):
    pass


@dataclass(frozen=True)
class Hold(Request["None"]):
    entered: threading.Event
    release: threading.Event


class Keeper(EnactActor):
    """Keeps one value in its database; ``Kept`` reads it, idle or not."""

    def __init__(self, context: ActorContext, *, answered_by: list[str]) -> None:
        super().__init__(context)
        self.answered_by = answered_by
        self.store = context.own_store()
        self.table = self.store.table(DATABASE)
        self.idle_reads.declare(Kept, lambda _: self._kept())

    def _kept(self) -> str:
        self.answered_by.append(threading.current_thread().name)
        document = self.store.read(lambda txn: self.table.get(txn, b"value"))
        return "" if document is None else str(document["value"])

    def handle(self, message: Any) -> Any:
        match message:
            case Keep(value=value):
                self.store.write(lambda txn: self.table.put(txn, b"value", {"value": value}))
                return None
            case Kept():
                return self._kept()
            case Hold(entered=entered, release=release):
                entered.set()
                release.wait(10)
                return None
        return super().handle(message)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def keeper(tmp_path: Path, metrics: Metrics) -> Iterator[tuple[Supervisor, list[str]]]:
    home = tmp_path / "home"
    home.mkdir()
    storage = Storage(home / "state", map_size=1 << 20)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    answered_by: list[str] = []
    supervisor = Supervisor(
        [ActorSpec(name="keeper", actor=Keeper, databases=(DATABASE,), options={"answered_by": answered_by})],
        home=home, config=load(home, environ={}), metrics=metrics, storage=storage, fence=fence,
        on_fatal=lambda _: None, clock=ManualClock(),
    )
    supervisor.start()
    try:
        yield supervisor, answered_by
    finally:
        supervisor.stop(timeout=5)
        fence.release()
        storage.close()


def test_an_idle_actor_answers_a_declared_read_in_the_askers_thread(keeper: tuple[Supervisor, list[str]]) -> None:
    supervisor, answered_by = keeper
    supervisor.ask("keeper", Keep(value="first"), timeout=10)

    assert supervisor.ask("keeper", Kept(), timeout=10) == "first"
    assert answered_by == [threading.current_thread().name]


def test_a_busy_actor_answers_the_read_itself_after_what_was_sent_before_it(
        keeper: tuple[Supervisor, list[str]]) -> None:
    supervisor, answered_by = keeper
    supervisor.ask("keeper", Keep(value="first"), timeout=10)
    entered, release = threading.Event(), threading.Event()
    supervisor.tell("keeper", Hold(entered=entered, release=release))
    assert entered.wait(10)
    supervisor.tell("keeper", Keep(value="second"))  # queued behind Hold, before the read
    replies: list[str] = []
    reader = threading.Thread(target=lambda: replies.append(supervisor.ask("keeper", Kept(), timeout=10)),
                              name="asker")
    reader.start()
    release.set()
    reader.join(10)

    assert replies == ["second"]
    assert answered_by and answered_by[0] != "asker"  # the actor's own thread, in mailbox order


def test_an_idle_read_is_counted_as_a_message_the_actor_handled(keeper: tuple[Supervisor, list[str]],
                                                                metrics: Metrics) -> None:
    supervisor, answered_by = keeper
    supervisor.ask("keeper", Kept(), timeout=10)

    assert answered_by == [threading.current_thread().name]
    assert metrics.registry.get_sample_value("enact_actor_messages_total", {"actor": "keeper", "type": "Kept"}) == 1.0


def test_the_same_read_of_an_actor_that_handled_nothing_since_is_answered_without_reading_again(
        keeper: tuple[Supervisor, list[str]]) -> None:
    supervisor, answered_by = keeper
    supervisor.ask("keeper", Keep(value="first"), timeout=10)
    assert [supervisor.ask("keeper", Kept(), timeout=10) for _ in range(3)] == ["first"] * 3
    assert len(answered_by) == 1  # read once: the actor handled nothing in between

    supervisor.ask("keeper", Keep(value="second"), timeout=10)
    assert supervisor.ask("keeper", Kept(), timeout=10) == "second"  # read again after a message it handled
    assert len(answered_by) == 2


def test_the_actors_activity_stays_while_nothing_happens_and_moves_with_each_message_and_each_end(
        keeper: tuple[Supervisor, list[str]]) -> None:
    """What a status checks before it gathers again (``ActorActivity``)."""
    supervisor, _ = keeper
    supervisor.ask("keeper", Keep(value="first"), timeout=10)
    quiet = supervisor.activity.count
    assert supervisor.ask("keeper", Kept(), timeout=10) == "first"  # an idle read: the actor does nothing
    assert supervisor.summary() == (("keeper",), (), {}, {}) and supervisor.activity.count == quiet

    supervisor.ask("keeper", Keep(value="second"), timeout=10)
    handled = supervisor.activity.count
    assert handled != quiet
    supervisor.stop(timeout=5)  # a thread that ended counts too
    assert supervisor.activity.count != handled


def test_a_message_counts_as_activity_from_being_queued_until_it_was_handled(
        keeper: tuple[Supervisor, list[str]]) -> None:
    supervisor, _ = keeper
    entered, release = threading.Event(), threading.Event()
    supervisor.tell("keeper", Hold(entered=entered, release=release))
    assert entered.wait(10)
    before_queued = supervisor.activity.count
    supervisor.tell("keeper", Keep(value="queued"))
    queued = supervisor.activity.count
    assert queued != before_queued  # a status that read the count before sees another one
    release.set()
    assert supervisor.ask("keeper", Kept(), timeout=10) == "queued"  # asked behind it: it was taken and handled
    assert supervisor.activity.count != queued  # taken from the mailbox: the actors' summary no longer says it waits
