"""The inbox's receipt state machine (enact.chat.receipts) on real LMDB,
without threads or actors: each step is one write, the generation an
argument, and what the actor carries out next is the returned value."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import lmdb
import pytest

from enact.chat.inbox_records import DATABASES, InboxRecords
from enact.chat.receipts import GiveUp, ReceiptRules, Resumption, RetryIn
from enact.chat.records import ReceiptStatus, TurnOutcome
from enact.chat.redaction import pattern_of
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import ChatEvent, Notify
from enact.messages.outbox import DeliveryOutcome
from enact.retry import Backoff
from enact.storage import Storage, Store

T = TypeVar("T")
GENERATION = 3
NOW = 1_700_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    storage = Storage(tmp_path / "state")
    yield storage.grant("inbox", DATABASES)
    storage.close()


@pytest.fixture
def rules(store: Store) -> ReceiptRules:
    return ReceiptRules(InboxRecords(store), Backoff(first_s=0.2, factor=2.0, attempts=3))


def write(store: Store, step: Callable[[lmdb.Transaction], T]) -> T:
    return store.write(step, fenced=False)


def event(message_id: str = "m1", cursor: int | None = None) -> ChatEvent:
    return ChatEvent(channel="local", conversation="c1", message_id=message_id, text="hello", cursor=cursor)


def test_a_new_event_gets_a_processing_receipt_and_a_redelivery_finds_it(store: Store, rules: ReceiptRules) -> None:
    first = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    again = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))

    assert not first.duplicate and first.receipt.status is ReceiptStatus.PROCESSING
    assert first.receipt.attempts == 1 and first.receipt.generation == GENERATION
    assert again.duplicate and again.key == first.key
    assert [key for key, _ in store.read(rules.unfinished)] == [first.key]


def test_a_failed_attempt_is_retried_with_back_off_until_the_attempts_run_out(
        store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    event_id = received.receipt.event_id

    failed = write(store, lambda txn: rules.fail_attempt(txn, event_id, "Timeout", "slow"))
    assert failed is not None and failed.last_error_class == "Timeout"
    assert rules.after_failure(event_id, failed) == RetryIn(0.2)
    assert rules.resumption(failed) is Resumption.ATTEMPT

    started = write(store, lambda txn: rules.start_attempt(txn, received.key, generation=GENERATION))
    assert started.attempts == 2
    write(store, lambda txn: rules.start_attempt(txn, received.key, generation=GENERATION))
    last = write(store, lambda txn: rules.fail_attempt(txn, event_id, "Timeout", "slow again"))

    assert last is not None and last.attempts == 3
    decided = rules.after_failure(event_id, last)
    assert isinstance(decided, GiveUp) and "after 3 attempts; failure class: Timeout" in decided.diagnostic
    assert rules.resumption(last) is Resumption.GIVE_UP


def test_a_reply_is_stored_once_and_an_answer_told_again_changes_nothing(store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    event_id = received.receipt.event_id

    stored = write(store, lambda txn: rules.store_reply(txn, event_id, "hi", (), TurnOutcome.REPLIED,
                                                        runtime_failure="", generation=GENERATION))
    again = write(store, lambda txn: rules.store_reply(txn, event_id, "other", (), TurnOutcome.REPLIED,
                                                       runtime_failure="", generation=GENERATION))
    late_failure = write(store, lambda txn: rules.fail_attempt(txn, event_id, "Timeout", "late"))

    assert stored is not None and stored[1].status is ReceiptStatus.REPLIED and stored[1].reply == "hi"
    assert again is None and late_failure is None
    assert rules.resumption(stored[1]) is Resumption.DELIVER


def test_a_runtime_failure_is_kept_as_the_attempts_error(store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    stored = write(store, lambda txn: rules.store_reply(
        txn, received.receipt.event_id, "advice", (), TurnOutcome.RUNTIME_FAILED,
        runtime_failure="RateLimited: try later", generation=GENERATION))

    assert stored is not None
    assert stored[1].last_error_class == "RateLimited" and stored[1].outcome is TurnOutcome.RUNTIME_FAILED


def test_completing_a_delivery_logs_the_turn_closes_the_receipt_and_advances_the_cursor(
        store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(cursor=7), origin=HUMAN_CLI, generation=GENERATION,
                                                      now=NOW))
    rules.cursors.of("local").received(7)
    event_id = received.receipt.event_id
    write(store, lambda txn: rules.store_reply(txn, event_id, "hi", (), TurnOutcome.REPLIED, runtime_failure="",
                                               generation=GENERATION))

    done = write(store, lambda txn: rules.complete(txn, event_id, DeliveryOutcome.DELIVERED, "", now=NOW))
    again = write(store, lambda txn: rules.complete(txn, event_id, DeliveryOutcome.DELIVERED, "", now=NOW))

    assert done is not None and again is None
    receipt, turn_cursor = done
    assert receipt.status is ReceiptStatus.COMPLETED and receipt.outcome is TurnOutcome.REPLIED
    assert turn_cursor == 1
    assert store.read(rules.unfinished) == []
    assert store.read(lambda txn: rules.records.cursor(txn, "local")) == 7
    assert rules.resumption(receipt) is Resumption.NOTHING


def test_a_failed_delivery_is_the_events_outcome(store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    event_id = received.receipt.event_id
    write(store, lambda txn: rules.store_reply(txn, event_id, "hi", (), TurnOutcome.REPLIED, runtime_failure="",
                                               generation=GENERATION))

    done = write(store, lambda txn: rules.complete(txn, event_id, DeliveryOutcome.FAILED, "channel down", now=NOW))

    assert done is not None and done[0].outcome is TurnOutcome.DELIVERY_FAILED


def test_the_cursor_never_moves_back(store: Store, rules: ReceiptRules) -> None:
    write(store, lambda txn: rules.write_cursor(txn, "local", 9))
    write(store, lambda txn: rules.write_cursor(txn, "local", 4))

    assert store.read(lambda txn: rules.records.cursor(txn, "local")) == 9


def test_a_notice_is_stored_replied_once(store: Store, rules: ReceiptRules) -> None:
    notice = Notify(channel="local", conversation="c1", notice_id="task-1", text="done", session_note="",
                    origin=HUMAN_CLI)

    stored = write(store, lambda txn: rules.store_notice(txn, notice, generation=GENERATION, now=NOW))
    again = write(store, lambda txn: rules.store_notice(txn, notice, generation=GENERATION, now=NOW))

    assert stored is not None and stored[1].status is ReceiptStatus.REPLIED and stored[1].reply == "done"
    assert again is None


def test_redaction_scrubs_the_turn_log_and_the_receipts(store: Store, rules: ReceiptRules) -> None:
    received = write(store, lambda txn: rules.receive(txn, event(), origin=HUMAN_CLI, generation=GENERATION, now=NOW))
    event_id = received.receipt.event_id
    write(store, lambda txn: rules.store_reply(txn, event_id, "your pin is 4321", (), TurnOutcome.REPLIED,
                                               runtime_failure="", generation=GENERATION))
    write(store, lambda txn: rules.complete(txn, event_id, DeliveryOutcome.DELIVERED, "", now=NOW))
    pattern = pattern_of(["4321"])
    assert pattern is not None

    redacted = write(store, lambda txn: rules.redact(txn, pattern, "[forgotten]"))

    assert (redacted.turns, redacted.receipts) == (1, 1)
    found = store.read(lambda txn: rules.records.find(txn, event_id))
    assert found is not None and "4321" not in found[1].reply
