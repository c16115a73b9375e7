"""Runtime sessions: session key to the runtime's native session id.

A mapping written under another prompt version reads as absent (and is left
in place, so rolling back the prompt finds it again). Writes are grouped per
commit; until a staged write commits, lookups read it from memory."""

from __future__ import annotations

import time
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.messages.common import Done
from enact.messages.sessions import (
    Forget,
    Forgotten,
    History,
    HistoryMessage,
    Lookup,
    NoSession,
    ReadHistory,
    Record,
    Session,
)
from enact.runtime.history import trim
from enact.storage import Document

SESSIONS = "runtime.sessions"
HISTORIES = "runtime.histories"
"""Session key -> the message history of a runtime that keeps none (``openai``):
``{"native_id": ..., "messages": [[role, content], ...]}``."""


class SessionsActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._sessions = self._store.table(SESSIONS)
        self._histories = self._store.table(HISTORIES)
        # Key -> document (None: deleted) staged but not yet committed.
        self._staged: dict[bytes, Document | None] = {}
        self._staged_histories: dict[bytes, Document | None] = {}

    def handle(self, message: Any) -> Any:
        match message:
            case Lookup():
                return self._lookup(message)
            case Record():
                return self._record(message)
            case Forget():
                return self._forget(message.key)
            case ReadHistory():
                return self._read_history(message)
        return super().handle(message)

    def _lookup(self, message: Lookup) -> Session | NoSession:
        if not message.key:
            return NoSession(key=message.key)
        document = self._current(message.key.encode())
        if document is None or document["prompt_version"] != message.prompt_version:
            return NoSession(key=message.key)
        return Session(key=message.key, **document)

    def _current(self, key: bytes) -> Document | None:
        if key in self._staged:
            return self._staged[key]
        return self._store.read(lambda txn: self._sessions.get(txn, key))

    def _current_history(self, key: bytes) -> Document | None:
        if key in self._staged_histories:
            return self._staged_histories[key]
        return self._store.read(lambda txn: self._histories.get(txn, key))

    def _read_history(self, message: ReadHistory) -> History:
        document = self._current_history(message.key.encode()) if message.key else None
        if document is None or document["native_id"] != message.native_id:
            return History(key=message.key, messages=())
        return History(key=message.key, messages=_messages(document))

    def _stage(self, key: bytes, document: Document | None, reply: object, *,
               history: Document | None = None, with_history: bool = False) -> Deferred:
        """Stage the mapping of ``key`` (None deletes it) and, ``with_history``,
        its history in the same commit."""
        self._staged[key] = document
        if with_history:
            self._staged_histories[key] = history

        def write(txn: lmdb.Transaction) -> None:
            if document is None:
                self._sessions.delete(txn, key)
            else:
                self._sessions.put(txn, key, document)
            if with_history and history is None:
                self._histories.delete(txn, key)
            elif history is not None:
                self._histories.put(txn, key, history)

        def settle(_: object) -> None:
            if self._staged.get(key) is document:
                del self._staged[key]
            if with_history and self._staged_histories.get(key) is history:
                del self._staged_histories[key]

        deferred = Deferred()

        def after(result: None) -> None:
            settle(result)
            deferred.resolve(reply)

        def failed(error: Exception) -> None:
            settle(error)
            deferred.fail(error)

        self._batch.stage(write, after, failed=failed)
        return deferred

    def _record(self, message: Record) -> Done | Deferred:
        if not message.key:
            return Done()  # isolated calls keep no mapping
        key = message.key.encode()
        now = time.time()
        document = self._current(key)
        same = (
            document is not None
            and document["native_id"] == message.native_id
            and document["prompt_version"] == message.prompt_version
        )
        turns = document["turns"] + 1 if same and document is not None else 1
        created = document["created_at"] if same and document is not None else now
        updated = {
            "native_id": message.native_id,
            "turns": turns,
            "created_at": created,
            "updated_at": now,
            "prompt_version": message.prompt_version,
        }
        if not message.exchange:
            return self._stage(key, updated, Done())
        previous = self._current_history(key)
        kept = _messages(previous) if previous is not None and previous["native_id"] == message.native_id else ()
        messages = trim((*kept, *message.exchange), message.history_chars)
        history = {"native_id": message.native_id, "messages": [[m.role, m.content] for m in messages]}
        return self._stage(key, updated, Done(), history=history, with_history=True)

    def _forget(self, key: str) -> Deferred:
        existed = self._current(key.encode()) is not None
        return self._stage(key.encode(), None, Forgotten(key=key, existed=existed), with_history=True)


def _messages(document: Document) -> tuple[HistoryMessage, ...]:
    return tuple(HistoryMessage(role=role, content=content) for role, content in document["messages"])
