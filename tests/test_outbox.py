"""The outbox: the delivery state machine as plain code, and the inbox and
outbox actors in this process (real LMDB) on homes left by a crash at each
point between the reply's commit and the receipt's completion."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from roster_services import daemon_actors

from enact import components, config
from enact.actors._base import ActorContext, EnactActor
from enact.actors.supervisor import ActorSpec, Supervisor
from enact.channels import DeliveryReport, InboxInlet, OutgoingReply
from enact.channels.telegram import TelegramChannel
from enact.channels.telegram_text import MAX_MESSAGE
from enact.chat import deliveries, inbox_records, records
from enact.chat import outbox_actor as outbox
from enact.chat.deliveries import Step
from enact.chat.parts import split_reply
from enact.chat.records import ReceiptStatus, TurnOutcome
from enact.chat.services import ChatServices
from enact.commands import CommandRegistry, builtin_commands
from enact.fence import Fence
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, GetOutcome, Outcome, ReadTurns, Receive, TurnLogged
from enact.messages.outbox import DeliveryOutcome, DeliveryRecord, DeliveryState
from enact.metrics import Metrics
from enact.retry import Backoff
from enact.runtime.scripted import ScriptedRuntime
from enact.storage import RecordTable, Storage, decode_record, encode_record

from conftest import wait_for

NOW = 1_700_000_000.0
THIS, EARLIER = 7, 6
"""Fence generations: this daemon's, and the one before it."""


def record(state: DeliveryState, *, generation: int = EARLIER, attempts: int = 1) -> DeliveryRecord:
    return DeliveryRecord(channel="test", conversation="c", message_id="m", text="hi", state=state,
                          attempts=attempts, error="", updated_at=NOW, generation=generation)


def step(found: DeliveryRecord | None, *, first: bool = False, replied_by: int = EARLIER,
         idempotent: bool = False) -> Step:
    return deliveries.on_deliver(found, first=first, replied_by=replied_by, generation=THIS, idempotent=idempotent)


# -- the state machine -----------------------------------------------------------


def test_the_first_deliver_sends_without_a_journal_record() -> None:
    assert step(None, first=True, replied_by=THIS) is Step.SEND


def test_a_repeated_deliver_waits_for_this_daemons_first_attempt() -> None:
    assert step(None, replied_by=THIS) is Step.WAIT


@pytest.mark.parametrize("idempotent, expected", [(False, Step.GIVE_UP), (True, Step.SEND)])
def test_an_earlier_daemons_unanswered_attempt_is_resent_only_where_idempotent(idempotent: bool,
                                                                              expected: Step) -> None:
    assert step(None, idempotent=idempotent) is expected  # its first attempt
    assert step(record(DeliveryState.IN_FLIGHT, attempts=2), idempotent=idempotent) is expected


@pytest.mark.parametrize("state", [DeliveryState.DELIVERED, DeliveryState.TERMINAL_FAILURE,
                                   DeliveryState.NOT_RESENT])
@pytest.mark.parametrize("generation", [THIS, EARLIER])
def test_a_finished_delivery_is_reported_again_never_resent(state: DeliveryState, generation: int) -> None:
    assert step(record(state, generation=generation), idempotent=True) is Step.REPORT


@pytest.mark.parametrize("state", [DeliveryState.IN_FLIGHT, DeliveryState.RETRYABLE_FAILURE])
def test_this_daemons_attempt_or_retry_is_waited_for(state: DeliveryState) -> None:
    assert step(record(state, generation=THIS), idempotent=True) is Step.WAIT


@pytest.mark.parametrize("state", [DeliveryState.RETRYABLE_FAILURE, DeliveryState.PENDING])
def test_an_earlier_daemons_retry_is_sent_at_once(state: DeliveryState) -> None:
    assert step(record(state)) is Step.SEND
    assert deliveries.retry_due(record(state))


def test_answers_move_the_attempt_to_its_end_state() -> None:
    policy = Backoff(first_s=1, attempts=3)
    first = record(DeliveryState.IN_FLIGHT)
    last = record(DeliveryState.IN_FLIGHT, attempts=3)

    def state_after(attempt: DeliveryRecord, ok: bool, retryable: bool) -> DeliveryState:
        return deliveries.answered(attempt, ok=ok, retryable=retryable, error="e", policy=policy, now=NOW).state

    assert state_after(first, True, False) is DeliveryState.DELIVERED
    assert state_after(first, False, True) is DeliveryState.RETRYABLE_FAILURE
    assert state_after(first, False, False) is DeliveryState.TERMINAL_FAILURE
    assert state_after(last, False, True) is DeliveryState.TERMINAL_FAILURE
    long = deliveries.answered(first, ok=False, retryable=False, error="x" * 5000, policy=policy, now=NOW)
    assert len(long.error) <= deliveries.MAX_ERROR
    assert long.outcome is DeliveryOutcome.FAILED


def test_an_answer_counts_only_for_the_attempt_in_flight() -> None:
    first = record(DeliveryState.IN_FLIGHT)
    assert deliveries.answers(None, first)
    assert not deliveries.answers(record(DeliveryState.DELIVERED), first)
    second = deliveries.next_attempt(record(DeliveryState.RETRYABLE_FAILURE), generation=THIS, now=NOW)
    assert second.attempts == 2 and second.generation == THIS
    assert deliveries.answers(second, second)
    assert not deliveries.answers(second, first)


def test_only_a_delivery_that_needed_more_than_its_first_attempt_is_journaled() -> None:
    first = record(DeliveryState.IN_FLIGHT, generation=THIS)
    policy = Backoff(first_s=1, attempts=3)
    delivered = deliveries.answered(first, ok=True, retryable=False, error="", policy=policy, now=NOW)
    failed = deliveries.answered(first, ok=False, retryable=True, error="e", policy=policy, now=NOW)
    assert deliveries.recorded_by_the_inbox(None, delivered)
    assert not deliveries.recorded_by_the_inbox(None, failed)
    second = deliveries.next_attempt(failed, generation=THIS, now=NOW)
    later = deliveries.answered(second, ok=True, retryable=False, error="", policy=policy, now=NOW)
    assert not deliveries.recorded_by_the_inbox(second, later)


def test_each_sent_part_puts_the_next_in_flight_and_the_last_ends_the_reply() -> None:
    policy = Backoff(first_s=1, attempts=3)
    first = dataclasses.replace(record(DeliveryState.IN_FLIGHT, generation=THIS), parts=3)
    second = deliveries.answered(first, ok=True, retryable=False, error="", policy=policy, now=NOW)
    assert (second.state, second.part, second.attempts) == (DeliveryState.IN_FLIGHT, 1, 1)
    assert deliveries.sends_next_part(second) and not deliveries.recorded_by_the_inbox(None, second)
    assert deliveries.answers(second, second) and not deliveries.answers(second, first)
    failed = deliveries.answered(second, ok=False, retryable=True, error="e", policy=policy, now=NOW)
    assert (failed.state, failed.part, failed.error) == (DeliveryState.RETRYABLE_FAILURE, 1, "part 2 of 3: e")
    retried = deliveries.next_attempt(failed, generation=THIS, now=NOW)
    third = deliveries.answered(retried, ok=True, retryable=False, error="", policy=policy, now=NOW)
    assert (third.part, third.attempts) == (2, 1)
    done = deliveries.answered(third, ok=True, retryable=False, error="", policy=policy, now=NOW)
    assert done.outcome is DeliveryOutcome.DELIVERED and not deliveries.sends_next_part(done)


def test_a_part_left_in_flight_is_not_resent_and_the_parts_after_it_are_sent() -> None:
    policy = Backoff(first_s=1, attempts=3)
    left = dataclasses.replace(record(DeliveryState.IN_FLIGHT), parts=3, part=1)
    assert step(left) is Step.GIVE_UP
    resumed = deliveries.given_up(left, generation=THIS, now=NOW)
    assert (resumed.state, resumed.part, resumed.unsure_parts, resumed.generation) == (
        DeliveryState.IN_FLIGHT, 2, (1,), THIS)
    assert step(resumed) is Step.WAIT  # this daemon sends it
    done = deliveries.answered(resumed, ok=True, retryable=False, error="", policy=policy, now=NOW)
    assert done.outcome is DeliveryOutcome.UNCERTAIN
    assert done.error.startswith("part 2 of 3: the daemon stopped") and "other parts were delivered" in done.error
    last = dataclasses.replace(record(DeliveryState.IN_FLIGHT), parts=3, part=2)
    ended = deliveries.given_up(last, generation=THIS, now=NOW)
    assert ended.outcome is DeliveryOutcome.UNCERTAIN and ended.error.startswith("part 3 of 3:")
    whole = deliveries.given_up(record(DeliveryState.IN_FLIGHT), generation=THIS, now=NOW)
    assert whole.outcome is DeliveryOutcome.UNCERTAIN and whole.error == deliveries.NOT_RESENT


def test_an_unsure_answer_is_sent_once_more_marked_then_given_up() -> None:
    policy = Backoff(first_s=1, attempts=3)
    first = record(DeliveryState.IN_FLIGHT, generation=THIS)
    lost = deliveries.answered(first, ok=False, retryable=True, error="cut", policy=policy, now=NOW, unsure=True)
    assert (lost.state, lost.repeated_parts) == (DeliveryState.RETRYABLE_FAILURE, (0,))
    again = deliveries.next_attempt(lost, generation=THIS, now=NOW)
    assert deliveries.repeats(again)
    lost_again = deliveries.answered(again, ok=False, retryable=True, error="cut", policy=policy, now=NOW,
                                     unsure=True)
    assert lost_again.outcome is DeliveryOutcome.UNCERTAIN and lost_again.error == deliveries.UNSURE_NOT_RESENT
    refused = deliveries.answered(again, ok=False, retryable=True, error="refused", policy=policy, now=NOW)
    assert refused.state is DeliveryState.RETRYABLE_FAILURE
    assert deliveries.repeats(deliveries.next_attempt(refused, generation=THIS, now=NOW))  # still may be a repeat


def test_an_unsure_part_of_a_reply_in_parts_is_given_up_after_its_marked_resend_and_the_rest_are_sent() -> None:
    policy = Backoff(first_s=1, attempts=3)
    second = dataclasses.replace(record(DeliveryState.IN_FLIGHT, generation=THIS), parts=3, part=1, attempts=2,
                                 repeated_parts=(1,))
    lost = deliveries.answered(second, ok=False, retryable=True, error="cut", policy=policy, now=NOW, unsure=True)
    assert (lost.state, lost.part, lost.unsure_parts) == (DeliveryState.IN_FLIGHT, 2, (1,))
    assert not deliveries.repeats(lost)


def test_an_unsure_answer_on_the_last_attempt_allowed_is_given_up() -> None:
    policy = Backoff(first_s=1, attempts=1)
    lost = deliveries.answered(record(DeliveryState.IN_FLIGHT, generation=THIS), ok=False, retryable=True,
                               error="cut", policy=policy, now=NOW, unsure=True)
    assert lost.outcome is DeliveryOutcome.UNCERTAIN


def test_a_retry_waits_at_least_as_long_as_the_channel_asked() -> None:
    policy = Backoff(first_s=0.5, factor=2.0, attempts=3)
    assert deliveries.retry_delay(policy, 1, 0.0) == policy.delay(1)
    assert deliveries.retry_delay(policy, 1, 90.0) == 90.0


def test_a_record_in_parts_survives_the_journal() -> None:
    stored = dataclasses.replace(record(DeliveryState.IN_FLIGHT), parts=3, part=2, unsure_parts=(1,))
    raw = orjson.loads(encode_record(stored, version=1))
    raw.pop("v")
    assert decode_record(DeliveryRecord, raw, database=outbox.DELIVERIES, key=b"k") == stored


def test_a_record_written_before_the_outbox_reads_as_an_earlier_daemons() -> None:
    old = {"channel": "local", "conversation": "c", "message_id": "m", "text": "hi", "state": "in_flight",
           "attempts": 1, "error": "", "updated_at": NOW}
    read = decode_record(DeliveryRecord, old, database=outbox.DELIVERIES, key=b"k")
    assert read.state is DeliveryState.IN_FLIGHT and read.generation == 0
    assert step(read) is Step.GIVE_UP


# -- the actors, on a home left by a crash -------------------------------------------


@dataclass(eq=False)
class RecordingChannel:
    """A channel that counts its deliveries and remembers finished events."""

    name: str = "test"
    idempotent_delivery: bool = False
    max_message_length: int = 0
    delivered: list[OutgoingReply] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    delivers_at_once: bool = False
    threads: list[str] = field(default_factory=list)

    def start(self, inbox: InboxInlet) -> None:
        pass

    def stop(self) -> None:
        pass

    def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        self.delivered.append(reply)
        self.threads.append(threading.current_thread().name)
        return DeliveryReport(ok=True)

    def acknowledge(self, cursor: int) -> None:
        pass

    def finished(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)


class Listener(EnactActor):
    """Subscribes to TurnLogged and keeps what it hears."""

    def __init__(self, context: ActorContext, *, heard: list[TurnLogged]) -> None:
        super().__init__(context)
        self._heard = heard

    def handle(self, message: Any) -> Any:
        if isinstance(message, TurnLogged):
            self._heard.append(message)
            return None
        return super().handle(message)


EVENT = ChatEvent(channel="test", conversation="c", message_id="m-1", text="hello", sender=HUMAN_CLI)


@dataclass
class Home:
    path: Path
    channel: RecordingChannel
    heard: list[TurnLogged] = field(default_factory=list)

    def leave(self, *, delivery: DeliveryRecord | None, generation: int = EARLIER) -> None:
        """Write what a daemon killed after committing the reply (and maybe
        the delivery) leaves behind."""
        storage = Storage(self.path / "state")
        try:
            inbox_store = storage.grant("inbox", inbox_records.DATABASES)
            outbox_store = storage.grant("outbox", outbox.DATABASES)
            inbox = inbox_records.InboxRecords(inbox_store)
            journal = RecordTable(outbox_store.table(outbox.DELIVERIES), DeliveryRecord)
            receipt = dataclasses.replace(records.new_receipt(EVENT, origin=HUMAN_CLI, generation=generation,
                                                                             now=time.time()),
                                          status=ReceiptStatus.REPLIED, reply="hi", outcome=TurnOutcome.REPLIED)
            key = inbox_store.write(lambda txn: inbox.create(txn, EVENT.event_id, receipt))
            if delivery is not None:
                outbox_store.write(lambda txn: journal.put(txn, key, delivery))
        finally:
            storage.close()

    def run(self, check: Callable[[Supervisor], None]) -> None:
        """Start the chat actors (a new daemon, a new generation) and ``check``."""
        settings = config.load(self.path, environ={}, settings=components.load().settings())
        storage = Storage(self.path / "state")
        fence = Fence(self.path, storage)
        fence.acquire(takeover=False)
        commands = CommandRegistry()
        for command in builtin_commands(commands):
            commands.register(command)
        services = ChatServices(channels={"test": self.channel}, runtime=ScriptedRuntime(self.path / "none.toml"),
                                commands=commands, startup_context="", origins={"test": HUMAN_CLI})
        # The listener first: an event is told only to subscribers running then.
        specs = [ActorSpec(name="listener", actor=Listener, options={"heard": self.heard}, subscribes=(TurnLogged,)),
                 *daemon_actors(services, settings)]
        fatal = threading.Event()
        supervisor = Supervisor(specs, home=self.path, config=settings, metrics=Metrics(), storage=storage,
                                fence=fence, on_fatal=lambda _: fatal.set())
        try:
            supervisor.start()
            check(supervisor)
        finally:
            supervisor.stop(5)
            fence.release()
            storage.close()
        assert not fatal.is_set()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    path = tmp_path / "home"
    path.mkdir()
    yield Home(path=path, channel=RecordingChannel())


def outcome_of(supervisor: Supervisor) -> Outcome:
    found = supervisor.ask("inbox", GetOutcome(event_id=EVENT.event_id), timeout=10)
    assert isinstance(found, Outcome)
    return found


def finished(supervisor: Supervisor, heard: list[TurnLogged]) -> Outcome:
    """The event's outcome, once its turn is logged and published."""
    try:
        wait_for(lambda: heard, timeout=10, what="the turn to be logged")
    except AssertionError:
        raise AssertionError(f"no turn was logged: {outcome_of(supervisor)}") from None
    return outcome_of(supervisor)


def test_a_delivery_committed_before_the_receipt_completed_is_completed_once_not_resent(home: Home) -> None:
    home.leave(delivery=record(DeliveryState.DELIVERED))

    def check(supervisor: Supervisor) -> None:
        assert finished(supervisor, home.heard).status == "replied"
        turns = supervisor.ask("inbox", ReadTurns(), timeout=10)
        [turn] = turns.turns
        [logged] = home.heard
        assert (logged.event_id, logged.cursor, logged.outcome) == (EVENT.event_id, turn.cursor, "replied")
        assert logged.conversation_key == "test:c"
        assert home.channel.delivered == []
        assert [o.event_id for o in home.channel.outcomes] == [EVENT.event_id]

    home.run(check)
    home.run(lambda supervisor: None)  # and a later start finds nothing left to do
    assert home.channel.delivered == [] and len(home.heard) == 1


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_first_attempt_left_unanswered_is_resent_only_where_idempotent(home: Home, idempotent: bool) -> None:
    home.channel.idempotent_delivery = idempotent
    home.leave(delivery=None)

    def check(supervisor: Supervisor) -> None:
        outcome = finished(supervisor, home.heard)
        if idempotent:
            assert outcome.status == "replied"
            assert [r.attempt for r in home.channel.delivered] == [2]
        else:
            assert outcome.status == "delivery_uncertain" and "not resent" in outcome.error
            assert home.channel.delivered == []

    home.run(check)


def test_a_reply_is_delivered_once_and_its_turn_published(home: Home) -> None:
    def check(supervisor: Supervisor) -> None:
        supervisor.ask("inbox", Receive(event=EVENT, origin=HUMAN_CLI), timeout=10)
        outcome = finished(supervisor, home.heard)
        assert outcome.status == "replied" and outcome.reply.endswith("hello")
        # Told again (a redelivered event): answered as a duplicate, not resent.
        supervisor.ask("inbox", Receive(event=EVENT, origin=HUMAN_CLI), timeout=10)
        assert len(home.channel.delivered) == 1 and len(home.heard) == 1

    home.run(check)


@pytest.mark.parametrize("at_once", [True, False])
def test_a_channel_that_delivers_at_once_is_called_by_the_inbox_as_the_turn_ends_others_on_their_pool(
        home: Home, at_once: bool) -> None:
    home.channel.delivers_at_once = at_once

    def check(supervisor: Supervisor) -> None:
        supervisor.ask("inbox", Receive(event=EVENT, origin=HUMAN_CLI), timeout=10)
        outcome = finished(supervisor, home.heard)
        assert outcome.status == "replied" and len(home.channel.delivered) == 1
        [thread] = home.channel.threads
        assert thread.startswith("InboxActor" if at_once else "enact-deliver-")

    home.run(check)


@pytest.mark.parametrize(("reply", "part"), [("x" * 4060, 0), ("word " * 2000, 1)])
def test_a_telegram_delivery_stored_by_an_earlier_daemon_goes_out_as_it_was_split(home: Home, reply: str,
                                                                                  part: int) -> None:
    # Split with Telegram's full limit, as the daemons before the repeat mark did.
    stored_parts = split_reply(reply, MAX_MESSAGE)
    home.channel.max_message_length = TelegramChannel.max_message_length
    home.leave(delivery=dataclasses.replace(record(DeliveryState.RETRYABLE_FAILURE), text=reply, part=part,
                                            parts=len(stored_parts)))

    def check(supervisor: Supervisor) -> None:
        assert finished(supervisor, home.heard).status == "replied"
        assert [d.text for d in home.channel.delivered] == stored_parts[part:]

    home.run(check)
