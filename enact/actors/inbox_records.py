"""The inbox's records: its databases, their keys and the documents in them.

Receipts and open marks (and the outbox's deliveries) are keyed by the
receipt's sequence number (big-endian), so the records of events in progress
sit together at the end of each tree and a commit touches the same few pages
however long the history grows; ``inbox.ids`` maps an event id to its number.
"""

from __future__ import annotations

import struct
import time

import lmdb

from enact.commands import clip
from enact.messages.inbox import ActionRecord, Attachment, ChatEvent
from enact.storage import CorruptRecord, Document, Store

RECEIPTS = "inbox.receipts"
IDS = "inbox.ids"
OPEN = "inbox.open"
CURSORS = "inbox.cursors"
TURNS = "logs.turns"
DATABASES = (RECEIPTS, IDS, OPEN, CURSORS, TURNS)
MAX_REPORTED_ERROR = 500
"""How much of an event's last error its outcome and turn carry."""

class InboxRecords:
    """The inbox's databases, opened from its own store."""

    def __init__(self, store: Store) -> None:
        self.ids = store.table(IDS)
        self.receipts = store.log(RECEIPTS)
        self.open = store.table(OPEN)
        self.cursors = store.table(CURSORS)
        self.turns = store.log(TURNS)

    def key_of(self, txn: lmdb.Transaction, event_id: str) -> bytes | None:
        entry = self.ids.get(txn, event_id.encode())
        return None if entry is None else self.receipts.key(entry["seq"])

    def find(self, txn: lmdb.Transaction, event_id: str) -> tuple[bytes, Document] | None:
        key = self.key_of(txn, event_id)
        if key is None:
            return None
        receipt = self.receipts.get(txn, key)
        if receipt is None:
            raise CorruptRecord(IDS, event_id.encode(), "points at a receipt that does not exist")
        return key, receipt

    def create(self, txn: lmdb.Transaction, event_id: str, receipt: Document) -> bytes:
        sequence = self.receipts.append(txn, receipt)
        self.ids.put(txn, event_id.encode(), {"seq": sequence})
        key = self.receipts.key(sequence)
        self.open.put(txn, key, {})
        return key


def sequence_of(key: bytes) -> int:
    """The receipt number in a receipt's key (the key of its delivery too)."""
    (sequence,) = struct.unpack(">Q", key)
    return int(sequence)


def actions_from(documents: list[Document]) -> tuple[ActionRecord, ...]:
    return tuple(ActionRecord(**d) for d in documents)


def action_documents(actions: tuple[ActionRecord, ...]) -> list[Document]:
    return [{"command": a.command, "args": a.args, "receipt": a.receipt, "ok": a.ok} for a in actions]


def event_document(event: ChatEvent) -> Document:
    return {
        "channel": event.channel,
        "conversation": event.conversation,
        "message_id": event.message_id,
        "text": event.text,
        "sender": event.sender,
        "cursor": event.cursor,
        "thread_id": event.thread_id,
        "reply_to": event.reply_to,
        "attachments": [
            {"kind": a.kind, "name": a.name, "mime_type": a.mime_type, "size": a.size} for a in event.attachments
        ],
    }


def event_from(document: Document) -> ChatEvent:
    fields = dict(document)
    fields["attachments"] = tuple(Attachment(**a) for a in document["attachments"])
    return ChatEvent(**fields)


def new_receipt(event: ChatEvent, *, origin: str, generation: int) -> Document:
    return {
        "event_id": event.event_id,
        "event": event_document(event),
        "origin": origin,
        "status": "processing",
        "attempts": 1,
        "errors": [],
        "reply": "",
        "actions": [],
        "outcome": "",
        "generation": generation,
        "received_at": time.time(),
        "finished_at": None,
    }


def last_error(receipt: Document) -> str:
    """The error that ended or last troubled the event: its delivery's, else
    its latest attempt's. Receipts written before ``delivery_error`` lack it."""
    errors = receipt["errors"]
    error = receipt.get("delivery_error") or (errors[-1]["error"] if errors else "")
    return clip(str(error), MAX_REPORTED_ERROR)


def turn_document(receipt: Document, outcome: str) -> Document:
    event = receipt["event"]
    return {
        "event_id": receipt["event_id"],
        "channel": event["channel"],
        "conversation": event["conversation"],
        "message_id": event["message_id"],
        "message": event["text"],
        "reply": receipt["reply"],
        "time": time.time(),
        "outcome": outcome,
        "attempts": receipt["attempts"],
        "actions": receipt["actions"],
        "error": last_error(receipt),
    }
