"""The inbox's typed records read what the untyped inbox wrote, and write
the same JSON objects (plus the fields added since)."""

from __future__ import annotations

from pathlib import Path

import orjson

from enact.chat import inbox_records, records
from enact.chat.records import Receipt, ReceiptStatus, TurnOutcome
from enact.messages.inbox import ChatEvent, Turn
from enact.storage import Storage, decode_record, encode_record

OLD_RECEIPT = {
    "event_id": "e1",
    "event": {"channel": "local", "conversation": "cli", "message_id": "m1", "text": "explode", "sender": "",
              "cursor": None, "thread_id": "", "reply_to": "",
              "attachments": [{"kind": "file", "name": "a.txt", "mime_type": "text/plain", "size": 3}]},
    "origin": "human:cli",
    "status": "processing",
    "attempts": 2,
    "errors": [{"attempt": 1, "error": "RuntimeFailure: the model is unavailable"}],
    "reply": "",
    "actions": [{"command": "status", "args": {}, "receipt": "fine", "ok": True}],
    "outcome": "",
    "generation": 3,
    "received_at": 1.5,
    "finished_at": None,
}
OLD_TURN = {"event_id": "e1", "channel": "local", "conversation": "cli", "message_id": "m1", "message": "hi",
            "reply": "hello", "time": 2.5, "outcome": "delivery_uncertain", "attempts": 1, "actions": []}


def read(cls: type, document: dict[str, object]) -> object:
    return decode_record(cls, document, database="test", key=b"k")


def test_a_receipt_written_before_the_records_were_typed_is_read() -> None:
    receipt = read(Receipt, OLD_RECEIPT)
    assert isinstance(receipt, Receipt)
    assert receipt.status is ReceiptStatus.PROCESSING and receipt.outcome is TurnOutcome.UNDECIDED
    assert receipt.event.attachments[0].name == "a.txt"
    assert receipt.last_error_class == "RuntimeFailure"  # read from its text: it predates error_class
    assert receipt.last_error == "RuntimeFailure: the model is unavailable"


def test_a_typed_receipt_is_stored_as_the_same_json_object_plus_the_new_fields() -> None:
    receipt = read(Receipt, OLD_RECEIPT)
    stored = orjson.loads(encode_record(receipt, version=1))
    assert stored.pop("v") == 1
    assert stored.pop("delivery_error") == ""
    assert stored["errors"][0].pop("error_class") == ""
    assert stored["event"]["attachments"][0].pop("path") == ""
    assert stored == OLD_RECEIPT
    turn = read(Turn, OLD_TURN)
    assert isinstance(turn, Turn) and turn.error == "" and turn.outcome == "delivery_uncertain"


def test_a_failed_attempt_keeps_its_error_class_as_a_field() -> None:
    event = ChatEvent(channel="local", conversation="cli", message_id="m1", text="explode")
    receipt = records.failed_attempt(records.new_receipt(event, origin="", generation=1, now=1.0), "Odd: Class",
                                     "why: so")
    assert receipt.errors[0].error == "Odd: Class: why: so"
    assert receipt.last_error_class == "Odd: Class"


def test_a_finished_receipt_carries_its_delivery_outcome() -> None:
    event = ChatEvent(channel="local", conversation="cli", message_id="m1", text="hi")
    replied = read(Receipt, {**OLD_RECEIPT, "status": "replied", "outcome": "failed", "errors": []})
    assert isinstance(replied, Receipt)
    done = records.finished(replied, TurnOutcome.DELIVERY_FAILED, "exit 1", now=2.0)
    assert done.status is ReceiptStatus.FAILED and done.outcome is TurnOutcome.DELIVERY_FAILED
    assert done.last_error == "exit 1" and done.outcome_of().status == "delivery_failed"
    delivered = records.finished(records.new_receipt(event, origin="", generation=1, now=1.0), None, "", now=2.0)
    assert delivered.status is ReceiptStatus.COMPLETED and delivered.finished_at is not None


def test_a_turn_is_stored_as_it_is_sent_and_one_logged_before_the_cursor_reads_it_from_its_key(
        tmp_path: Path) -> None:
    storage = Storage(tmp_path / "state")
    try:
        store = storage.grant("inbox", inbox_records.DATABASES)
        log = store.log(inbox_records.TURNS)
        turns = inbox_records.InboxRecords(store).turns
        old = store.write(lambda txn: log.append(txn, OLD_TURN), fenced=False)  # as the inbox wrote it before
        turn = Turn(**{**OLD_TURN, "event_id": "e2", "actions": ()})
        new = store.write(lambda txn: turns.append(txn, turn), fenced=False)

        read_back = store.read(lambda txn: dict(turns.iterate(log.iterate_from(txn, 0))))
        assert read_back[old] == Turn(**{**OLD_TURN, "cursor": old, "actions": ()})
        assert read_back[new].cursor == new and read_back[new].event_id == "e2"
        stored = store.read(lambda txn: log.get(txn, log.key(new)))
        assert stored is not None and stored["cursor"] == new
    finally:
        storage.close()
