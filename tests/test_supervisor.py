"""The supervisor, in process, with real storage, metrics and epoch fence."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykka
import pytest

from enact.actors._asks import ActorNotFound, ActorUnavailable, AskTimeout, UnexpectedReply
from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.clock import ManualClock
from enact.config import load
from enact.fence import Fence, FencedError
from enact.messages import Request
from enact.messages.control import ActorStatus
from enact.messages.epoch import Fenced
from enact.metrics import Metrics
from enact.storage import OwnershipError, Storage

from conftest import wait_for

# --- test actors and their messages -------------------------------------------------


@dataclass(frozen=True)
class Ping(Request["int | str"]):
    pass


@dataclass(frozen=True)
class Crash(Request["None"]):
    pass


@dataclass(frozen=True)
class Quit(Request["None"]):
    """The actor stops itself: nobody asked the supervisor to stop it."""


@dataclass(frozen=True)
class NoteLater(Request["None"]):
    """The actor tells itself ``Note`` after ``delay`` (its clock's)."""

    delay: float


@dataclass(frozen=True)
class Note:
    pass


@dataclass(frozen=True)
class Block(Request["None"]):
    release: threading.Event
    entered: threading.Event


@dataclass(frozen=True)
class Record(Request["None"]):
    text: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Remember(Request["None"]):
    value: str


@dataclass(frozen=True)
class Recall(Request["str"]):
    pass


class Recorder(EnactActor):
    """Writes its life (start, messages, stop) into a shared list."""

    def __init__(self, context: ActorContext, *, events: list[str], start_delay_s: float = 0.0) -> None:
        super().__init__(context)
        self.events = events
        self.start_delay_s = start_delay_s

    def on_start(self) -> None:
        time.sleep(self.start_delay_s)
        self.events.append(f"start {self.context.name}")

    def on_stop(self) -> None:
        self.events.append(f"stop {self.context.name}")

    def handle(self, message: Any) -> Any:
        match message:
            case Ping():
                return "pong"
            case Record(text=text, seconds=seconds):
                time.sleep(seconds)
                self.events.append(f"{self.context.name} {text}")
                return None
            case Block(release=release, entered=entered):
                entered.set()
                release.wait(10)
                return None
        return super().handle(message)


class Flaky(EnactActor):
    """Fails on Crash; every incarnation has its own number."""

    incarnations = 0
    noted: list[int] = []  # noqa: RUF012 (each test starts it afresh)

    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        type(self).incarnations += 1
        self.incarnation = type(self).incarnations

    def handle(self, message: Any) -> Any:
        match message:
            case Ping():
                return self.incarnation
            case Crash():
                raise RuntimeError(f"boom in incarnation {self.incarnation}")
            case Quit():
                self.actor_ref.stop(block=False)
                return None
            case NoteLater(delay=delay):
                self.tell_later(delay, Note())
                return None
            case Note():
                type(self).noted.append(self.incarnation)
                return None
            case Remember(value=value):
                store = self.context.own_store()
                store.write(lambda txn: store.table("flaky.data").put(txn, b"value", {"value": value}))
                return None
            case Recall():
                store = self.context.own_store()
                document = store.read(lambda txn: store.table("flaky.data").get(txn, b"value"))
                return None if document is None else document["value"]
        return super().handle(message)


class FailsToStart(EnactActor):
    def on_start(self) -> None:
        raise RuntimeError("cannot load my state")


# --- the rig: a home with real storage, metrics and a held fence ---------------------


wait_until = functools.partial(wait_for, every=0.005)
"""conftest's wait, with a step fine enough for a restart's short states."""


@dataclass
class Rig:
    home: Path
    storage: Storage
    fence: Fence
    metrics: Metrics = field(default_factory=Metrics)
    fatal: list[str] = field(default_factory=list)
    supervisors: list[Supervisor] = field(default_factory=list)
    clock: ManualClock = field(default_factory=ManualClock)

    def supervisor(self, specs: list[ActorSpec], **overrides: Any) -> Supervisor:
        supervisor = Supervisor(
            specs,
            home=self.home,
            config=load(self.home, environ={}, overrides=overrides),
            metrics=self.metrics,
            storage=self.storage,
            fence=self.fence,
            on_fatal=self.fatal.append,
            clock=self.clock,
        )
        self.supervisors.append(supervisor)
        return supervisor

    def started(self, specs: list[ActorSpec], **overrides: Any) -> Supervisor:
        supervisor = self.supervisor(specs, **overrides)
        supervisor.start()
        return supervisor

    def restarts_metric(self, actor: str) -> float | None:
        return self.metrics.registry.get_sample_value("enact_actor_restarts_total", {"actor": actor})


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[supervisor]\nmax_restarts = 2\n", encoding="utf-8")
    storage = Storage(home / "state", map_size=1 << 20)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    Flaky.incarnations = 0
    Flaky.noted = []
    built = Rig(home=home, storage=storage, fence=fence)
    try:
        yield built
    finally:
        for supervisor in built.supervisors:
            supervisor.stop(timeout=5)
        fence.release()
        storage.close()


def status_of(supervisor: Supervisor, name: str) -> ActorStatus:
    return next(s for s in supervisor.statuses() if s.name == name)


def _alive_after(supervisor: Supervisor, name: str, restarts: int) -> bool:
    status = status_of(supervisor, name)
    return status.alive and status.restarts == restarts


# --- start and stop order -------------------------------------------------------------


def test_actors_start_in_dependency_order_and_stop_in_reverse(rig: Rig) -> None:
    events: list[str] = []
    specs = [
        ActorSpec(name="inbox", actor=Recorder, depends_on=("journal", "epochish"), options={"events": events}),
        ActorSpec(name="journal", actor=Recorder, depends_on=("epochish",), options={"events": events}),
        # The first actor is slow to start: its dependants must still wait for it.
        ActorSpec(name="epochish", actor=Recorder, options={"events": events, "start_delay_s": 0.05}),
        ActorSpec(name="loner", actor=Recorder, options={"events": events}),
    ]
    supervisor = rig.started(specs)
    assert events == ["start epochish", "start journal", "start inbox", "start loner"]
    assert [s.name for s in supervisor.statuses()] == ["epochish", "inbox", "journal", "loner"]
    assert all(s.alive for s in supervisor.statuses())
    events.clear()
    supervisor.stop(timeout=5)
    assert events == ["stop loner", "stop inbox", "stop journal", "stop epochish"]


def test_a_database_claimed_by_two_actors_fails_at_construction(rig: Rig) -> None:
    events: list[str] = []
    specs = [
        ActorSpec(name="a", actor=Recorder, databases=("shared.db",), options={"events": events}),
        ActorSpec(name="b", actor=Recorder, databases=("b.own", "shared.db"), options={"events": events}),
    ]
    with pytest.raises(OwnershipError, match=r"b asked for database 'shared.db', which a owns"):
        rig.supervisor(specs)
    assert events == []


def test_a_database_of_the_fence_cannot_be_claimed(rig: Rig) -> None:
    with pytest.raises(OwnershipError, match=r"'epoch', which epoch owns"):
        rig.supervisor([ActorSpec(name="thief", actor=Flaky, databases=("epoch",))])


@pytest.mark.parametrize(
    ("specs", "match"),
    [
        (
            [ActorSpec(name="a", actor=Flaky, depends_on=("b",)), ActorSpec(name="b", actor=Flaky, depends_on=("a",))],
            r"actor dependency cycle: a -> b -> a",
        ),
        ([ActorSpec(name="a", actor=Flaky, depends_on=("a",))], r"actor dependency cycle: a -> a"),
        ([ActorSpec(name="a", actor=Flaky, depends_on=("ghost",))], r"actor a depends on unknown actor ghost"),
        ([ActorSpec(name="a", actor=Flaky), ActorSpec(name="a", actor=Flaky)], r"two actor specs share a name"),
    ],
)
def test_a_bad_dependency_graph_is_refused(rig: Rig, specs: list[ActorSpec], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        rig.supervisor(specs)
    assert Flaky.incarnations == 0


def test_an_actor_that_cannot_start_fails_the_start(rig: Rig) -> None:
    events: list[str] = []
    specs = [
        ActorSpec(name="broken", actor=FailsToStart),
        ActorSpec(name="after", actor=Recorder, depends_on=("broken",), options={"events": events}),
    ]
    supervisor = rig.supervisor(specs)
    with pytest.raises(RuntimeError, match="actor broken failed to start"):
        supervisor.start()
    assert events == []  # its dependant was never started


# --- addressing ----------------------------------------------------------------------


def test_an_unknown_name_is_actor_not_found(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    with pytest.raises(ActorNotFound, match="no actor named 'ghost' is running"):
        supervisor.ask("ghost", Ping(), timeout=1)
    with pytest.raises(ActorNotFound):
        supervisor.tell("ghost", Ping())
    assert supervisor.has("flaky") and not supervisor.has("ghost")


def test_an_exception_in_an_ask_goes_back_to_the_caller_and_the_actor_lives(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    with pytest.raises(RuntimeError, match="boom in incarnation 1"):
        supervisor.ask("flaky", Crash(), timeout=5)
    assert supervisor.ask("flaky", Ping(), timeout=5) == 1
    assert status_of(supervisor, "flaky").restarts == 0


def test_an_unknown_message_is_a_bug_reported_to_the_caller(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    with pytest.raises(TypeError, match="actor 'flaky' does not handle str"):
        supervisor.call("flaky", "hello", timeout=5)


# --- restarts ------------------------------------------------------------------------


def test_a_failed_actor_is_restarted_and_callers_reach_the_new_one(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky, databases=("flaky.data",))])
    assert supervisor.ask("flaky", Ping(), timeout=5) == 1
    supervisor.ask("flaky", Remember(value="kept"), timeout=5)
    supervisor.tell("flaky", Crash())
    # Asked right behind the crash: reaches the restarted actor, not the dead ref.
    assert supervisor.ask("flaky", Ping(), timeout=5) == 2
    assert supervisor.ask("flaky", Recall(), timeout=5) == "kept"  # same store after the restart
    status = status_of(supervisor, "flaky")
    assert status.alive and status.restarts == 1
    assert rig.restarts_metric("flaky") == 1.0
    assert rig.fatal == []


def test_handled_counts_survive_restarts(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    for _ in range(3):
        supervisor.ask("flaky", Ping(), timeout=5)
    supervisor.tell("flaky", Crash())
    wait_until(lambda: status_of(supervisor, "flaky").restarts == 1, what="the restart")
    assert supervisor.ask("flaky", Ping(), timeout=5) == 2
    status = status_of(supervisor, "flaky")
    assert status.handled == 5  # three pings, the crash, one more ping
    assert rig.metrics.registry.get_sample_value(
        "enact_actor_messages_total", {"actor": "flaky", "type": "Ping"}
    ) == 4.0


def test_too_many_restarts_within_the_window_is_fatal(rig: Rig) -> None:
    # max_restarts = 2 comes from the home's config.toml.
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    for restarts in range(3):
        wait_until(functools.partial(_alive_after, supervisor, "flaky", restarts), what=f"restart {restarts}")
        supervisor.tell("flaky", Crash())
    wait_until(lambda: bool(rig.fatal), what="on_fatal")
    assert len(rig.fatal) == 1
    reason = rig.fatal[0]
    assert "actor flaky" in reason
    assert "after 2 restarts within 60 s" in reason
    assert "boom in incarnation 3" in reason
    assert status_of(supervisor, "flaky").restarts == 2
    assert rig.restarts_metric("flaky") == 2.0
    assert not status_of(supervisor, "flaky").alive


def test_max_restarts_from_the_command_line(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)], **{"supervisor.max_restarts": 1})
    supervisor.tell("flaky", Crash())
    wait_until(lambda: _alive_after(supervisor, "flaky", 1))
    supervisor.tell("flaky", Crash())
    wait_until(lambda: bool(rig.fatal), what="on_fatal")
    assert "actor flaky failed again after 1 restarts" in rig.fatal[0]


def test_restarts_outside_the_window_are_forgotten(rig: Rig) -> None:
    supervisor = rig.started(
        [ActorSpec(name="flaky", actor=Flaky)],
        **{"supervisor.max_restarts": 1, "supervisor.restart_window_s": 1.0},
    )
    supervisor.tell("flaky", Crash())
    wait_until(lambda: _alive_after(supervisor, "flaky", 1))
    rig.clock.advance(1.1)  # the first restart leaves the one-second window
    supervisor.tell("flaky", Crash())
    wait_until(lambda: _alive_after(supervisor, "flaky", 2))
    assert rig.fatal == []


def test_an_actor_that_fails_to_restart_counts_as_failing_again(rig: Rig) -> None:
    class CrashesThenCannotStart(Flaky):
        def on_start(self) -> None:
            if self.incarnation > 1:
                raise RuntimeError("cannot start again")

    supervisor = rig.started([ActorSpec(name="flaky", actor=CrashesThenCannotStart)])
    supervisor.tell("flaky", Crash())
    wait_until(lambda: bool(rig.fatal), what="on_fatal")
    assert "actor flaky failed again after 2 restarts" in rig.fatal[0]
    assert "last failure: actor flaky failed to start" in rig.fatal[0]


def test_an_actor_that_stops_itself_is_restarted(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    supervisor.tell("flaky", Quit())
    # Heard from the ending actor's thread: no failure was reported.
    wait_until(lambda: _alive_after(supervisor, "flaky", restarts=1), what="the restart")
    assert supervisor.ask("flaky", Ping(), timeout=5) == 2
    assert "after failure: stopped unexpectedly" in caplog.text


def test_a_timer_that_comes_due_while_its_actor_restarts_reaches_the_next_incarnation(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    supervisor.ask("flaky", NoteLater(delay=1.0), timeout=5)
    first = supervisor._slots["flaky"].ref
    assert first is not None
    supervisor.tell("flaky", Crash())
    assert first.actor_stopped.wait(5)  # failed; its restart waits out a back-off
    rig.clock.advance(1.0)  # the timer fires now, and returns: the wait for the restart is not its thread's
    wait_until(lambda: Flaky.noted == [2], what="the note told to the restarted actor")


def test_the_supervisors_watch_ends_with_the_stop(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    supervisor.stop(timeout=5)
    supervisor._monitor.join(5)  # woken by the stop, not by a look every so often
    assert not supervisor._monitor.is_alive()


# --- mailboxes and stopping -------------------------------------------------------------


def test_the_mailbox_depth_is_visible_while_an_actor_is_blocked(rig: Rig) -> None:
    events: list[str] = []
    supervisor = rig.started([ActorSpec(name="slow", actor=Recorder, options={"events": events})])
    release, entered = threading.Event(), threading.Event()
    supervisor.tell("slow", Block(release=release, entered=entered))
    assert entered.wait(5)
    for i in range(3):
        supervisor.tell("slow", Record(text=f"queued {i}"))
    status = status_of(supervisor, "slow")
    assert status.mailbox == 3
    assert supervisor.mailbox_depths() == {"slow": 3}
    release.set()
    wait_until(lambda: status_of(supervisor, "slow").handled == 4, what="the queue drained")
    assert status_of(supervisor, "slow").mailbox == 0
    assert events[-3:] == ["slow queued 0", "slow queued 1", "slow queued 2"]


def test_the_summary_says_each_change_to_the_actors_after_one_was_made(rig: Rig) -> None:
    """The summary keeps what it looked at between requests: each change
    (messages waiting, a restart, a child spawned and retired, a stop) shows
    in the next one all the same."""
    events: list[str] = []
    supervisor = rig.started([ActorSpec(name="slow", actor=Recorder, options={"events": events}),
                              ActorSpec(name="flaky", actor=Flaky)])
    assert supervisor.summary() == (("flaky", "slow"), (), {}, {})
    release, entered = threading.Event(), threading.Event()
    supervisor.tell("slow", Block(release=release, entered=entered))
    assert entered.wait(5)
    supervisor.tell("slow", Record(text="queued"))
    assert supervisor.summary() == (("flaky", "slow"), (), {}, {"slow": 1})
    release.set()
    wait_until(lambda: supervisor.summary() == (("flaky", "slow"), (), {}, {}), what="the queue drained")
    supervisor.tell("flaky", Crash())
    wait_until(lambda: supervisor.summary() == (("flaky", "slow"), (), {"flaky": 1}, {}), what="the restart")
    supervisor.spawn(ActorSpec(name="child", actor=Recorder, options={"events": events}), family="child")
    assert supervisor.summary() == (("child", "flaky", "slow"), (), {"flaky": 1}, {})
    supervisor.retire("child")
    assert supervisor.summary() == (("flaky", "slow"), (), {"flaky": 1}, {})
    supervisor.stop(timeout=5)
    assert supervisor.summary() == (("flaky", "slow"), ("flaky", "slow"), {"flaky": 1}, {})


def test_stop_lets_queued_messages_finish(rig: Rig) -> None:
    events: list[str] = []
    specs = [
        ActorSpec(name="first", actor=Recorder, options={"events": events}),
        ActorSpec(name="second", actor=Recorder, depends_on=("first",), options={"events": events}),
    ]
    supervisor = rig.started(specs)
    for i in range(5):
        supervisor.tell("second", Record(text=f"m{i}", seconds=0.01))
        supervisor.tell("first", Record(text=f"m{i}"))
    events.clear()
    supervisor.stop(timeout=5)
    second = [e for e in events if e.startswith("second")]
    assert second == [f"second m{i}" for i in range(5)]
    # Everything queued in an actor is handled before that actor stops.
    assert events.index("stop second") > events.index("second m4")
    assert events.index("stop first") > events.index("first m4")
    assert events[-2:] == ["stop second", "stop first"]


def test_stop_gives_up_on_a_stuck_actor_after_the_timeout(rig: Rig) -> None:
    events: list[str] = []
    supervisor = rig.started([ActorSpec(name="stuck", actor=Recorder, options={"events": events})])
    release, entered = threading.Event(), threading.Event()
    supervisor.tell("stuck", Block(release=release, entered=entered))
    assert entered.wait(5)
    started = time.monotonic()
    supervisor.stop(timeout=0.2)
    assert time.monotonic() - started < 2
    assert "stop stuck" not in events
    release.set()
    wait_until(lambda: "stop stuck" in events, what="the stuck actor's stop")


def test_a_stopped_supervisor_does_not_restart(rig: Rig) -> None:
    supervisor = rig.started([ActorSpec(name="flaky", actor=Flaky)])
    supervisor.stop(timeout=5)
    assert not supervisor.has("flaky")
    assert not status_of(supervisor, "flaky").alive
    with pytest.raises((ActorNotFound, pykka.ActorDeadError)):
        supervisor.ask("flaky", Ping(), timeout=1)
    assert status_of(supervisor, "flaky").restarts == 0


# --- typed asks: the declared reply, or a typed error within the deadline ------------


@dataclass(frozen=True)
class AnswerWrongly(Request["int"]):
    """Declares an int reply; the actor answers a string."""


@dataclass(frozen=True)
class BeFenced(Request["int"]):
    pass


@dataclass(frozen=True)
class Stall(Request["str"]):
    """Answered with a commit that never comes (a Deferred left unresolved)."""


@dataclass(frozen=True)
class OweThenCrash(Request["str"]):
    """Answers later (a Deferred), then the actor fails before it does."""


@dataclass(frozen=True)
class Break(Request["None"]):
    pass


@dataclass(frozen=True)
class Announce(Request["None"]):
    text: str


@dataclass(frozen=True)
class Announced:
    text: str


@dataclass(frozen=True)
class Heard(Request["list[str]"]):
    pass


@dataclass(frozen=True)
class CallbacksThenCommit(Request["str"]):
    """Stages two writes: the first one's callback raises, the second's answers."""


class Tricky(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self.batch = WriteBatch(context.own_store(), owner=context.name)
        self.heard: list[str] = []

    def handle(self, message: Any) -> Any:
        batch = self.batch
        assert batch is not None
        match message:
            case AnswerWrongly():
                return "not an int"
            case BeFenced():
                return Fenced(generation=1, current_generation=2)
            case Stall():
                return Deferred()
            case OweThenCrash():
                self.actor_ref.tell(Break())
                return Deferred()
            case Break():
                raise RuntimeError("broken on purpose")
            case Announce(text=text):
                self.context.publish(Announced(text=text))
                return None
            case Announced(text=text):
                self.heard.append(text)
                return None
            case Heard():
                return list(self.heard)
            case CallbacksThenCommit():
                reply = Deferred()

                def explode(_: object) -> None:
                    raise ValueError("a defect in a callback")

                batch.stage(lambda txn: None, explode)
                batch.stage(lambda txn: None, lambda _: reply.resolve("second callback ran"), failed=reply.fail)
                return reply
        return super().handle(message)


def tricky(rig: Rig, *names: str, subscribes: tuple[type[Any], ...] = ()) -> Supervisor:
    return rig.started(
        [ActorSpec(name=name, actor=Tricky, databases=(f"{name}.db",), subscribes=subscribes) for name in names]
    )


def test_a_reply_of_an_undeclared_type_is_an_unexpected_reply(rig: Rig) -> None:
    supervisor = tricky(rig, "tricky")
    with pytest.raises(UnexpectedReply, match="AnswerWrongly got an unexpected reply: str"):
        supervisor.ask("tricky", AnswerWrongly(), timeout=5)


def test_a_fenced_reply_is_a_fenced_error_unless_the_request_declares_it(rig: Rig) -> None:
    supervisor = tricky(rig, "tricky")
    with pytest.raises(FencedError, match="generation 1 was superseded by generation 2"):
        supervisor.ask("tricky", BeFenced(), timeout=5)


def test_an_ask_whose_commit_never_comes_times_out_within_its_one_deadline(rig: Rig) -> None:
    supervisor = tricky(rig, "tricky")
    started = time.monotonic()
    with pytest.raises(AskTimeout, match=r"did not answer Stall within 0\.3 s"):
        supervisor.ask("tricky", Stall(), timeout=0.3)
    assert time.monotonic() - started < 1.0  # not the ask's timeout plus the commit wait's


def test_an_ask_to_an_unknown_actor_is_actor_unavailable(rig: Rig) -> None:
    supervisor = tricky(rig, "tricky")
    with pytest.raises(ActorUnavailable, match="no actor named 'nobody'"):
        supervisor.ask("nobody", Stall(), timeout=1)


def test_a_failed_actor_fails_the_replies_it_owes_at_once(rig: Rig) -> None:
    supervisor = tricky(rig, "tricky")
    started = time.monotonic()
    with pytest.raises(ActorUnavailable, match=r"actor 'tricky' failed: RuntimeError\('broken on purpose'\)"):
        supervisor.ask("tricky", OweThenCrash(), timeout=30)
    assert time.monotonic() - started < 5, "the caller waited for its deadline instead of hearing of the failure"
    wait_until(lambda: _alive_after(supervisor, "tricky", 1), what="the restart")


def test_a_raising_callback_is_logged_and_counted_and_the_others_still_run(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor = tricky(rig, "tricky")
    assert supervisor.ask("tricky", CallbacksThenCommit(), timeout=5) == "second callback ran"
    assert "a callback after a committed write failed" in caplog.text
    assert rig.metrics.registry.get_sample_value("enact_actor_callback_errors_total", {"actor": "tricky"}) == 1
    assert status_of(supervisor, "tricky").restarts == 0


# --- the event feed ---------------------------------------------------------------------


def test_published_events_are_told_to_their_subscribers_only(rig: Rig) -> None:
    supervisor = rig.started(
        [
            ActorSpec(name="speaker", actor=Tricky, databases=("speaker.db",)),
            ActorSpec(name="listener", actor=Tricky, databases=("listener.db",), subscribes=(Announced,)),
            ActorSpec(name="other", actor=Tricky, databases=("other.db",)),
        ]
    )
    supervisor.ask("speaker", Announce(text="a turn was logged"), timeout=5)
    wait_until(lambda: supervisor.ask("listener", Heard(), timeout=5) == ["a turn was logged"], what="the event")
    assert supervisor.ask("speaker", Heard(), timeout=5) == []
    assert supervisor.ask("other", Heard(), timeout=5) == []


def test_a_subscriber_is_told_events_only_while_it_listens(rig: Rig) -> None:
    listens = [False]
    supervisor = rig.started([
        ActorSpec(name="speaker", actor=Tricky, databases=("speaker.db",)),
        ActorSpec(name="listener", actor=Tricky, databases=("listener.db",), subscribes=(Announced,),
                  listening=lambda: listens[0]),
    ])
    supervisor.ask("speaker", Announce(text="nobody looks"), timeout=5)
    listens[0] = True
    supervisor.ask("speaker", Announce(text="a page is open"), timeout=5)
    wait_until(lambda: supervisor.ask("listener", Heard(), timeout=5) == ["a page is open"], what="the event")


def test_an_event_for_a_subscriber_that_is_not_running_is_dropped_not_raised(rig: Rig) -> None:
    supervisor = tricky(rig, "speaker")
    supervisor.publish(Announced(text="nobody listens"))  # no subscriber: nothing happens
    listening = rig.started([ActorSpec(name="listener", actor=Tricky, databases=("l.db",), subscribes=(Announced,))])
    listening.stop(timeout=5)
    listening.publish(Announced(text="after the stop"))  # its subscriber is gone: dropped
