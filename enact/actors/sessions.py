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
from enact.messages.sessions import Forget, Forgotten, Lookup, NoSession, Record, Session
from enact.storage import Document

SESSIONS = "runtime.sessions"
HISTORIES = "runtime.histories"
"""Message history for stateless HTTP runtimes (used once such an adapter lands)."""


class SessionsActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._sessions = self._store.table(SESSIONS)
        # Key -> document (None: deleted) staged but not yet committed.
        self._staged: dict[bytes, Document | None] = {}

    def handle(self, message: Any) -> Any:
        match message:
            case Lookup():
                return self._lookup(message)
            case Record():
                return self._record(message)
            case Forget():
                return self._forget(message.key)
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

    def _stage(self, key: bytes, document: Document | None, reply: object) -> Deferred:
        self._staged[key] = document

        def write(txn: lmdb.Transaction) -> None:
            if document is None:
                self._sessions.delete(txn, key)
            else:
                self._sessions.put(txn, key, document)

        def settle(_: object) -> None:
            if self._staged.get(key) is document:
                del self._staged[key]

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
        return self._stage(key, updated, Done())

    def _forget(self, key: str) -> Deferred:
        existed = self._current(key.encode()) is not None
        return self._stage(key.encode(), None, Forgotten(key=key, existed=existed))
