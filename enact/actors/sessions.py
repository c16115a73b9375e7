"""Runtime sessions: session key to the runtime's native session id.

A mapping written under another prompt version reads as absent (and is left
in place, so rolling back the prompt finds it again)."""

from __future__ import annotations

import time
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.messages.common import Done
from enact.messages.sessions import Forget, Forgotten, Lookup, NoSession, Record, Session

SESSIONS = "runtime.sessions"
HISTORIES = "runtime.histories"
"""Message history for stateless HTTP runtimes (used once such an adapter lands)."""


class SessionsActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._sessions = self._store.table(SESSIONS)

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
        document = self._store.read(lambda txn: self._sessions.get(txn, message.key.encode()))
        if document is None or document["prompt_version"] != message.prompt_version:
            return NoSession(key=message.key)
        return Session(key=message.key, **document)

    def _record(self, message: Record) -> Done:
        if not message.key:
            return Done()  # isolated calls keep no mapping
        key = message.key.encode()

        def write(txn: lmdb.Transaction) -> None:
            now = time.time()
            document = self._sessions.get(txn, key)
            same = (
                document is not None
                and document["native_id"] == message.native_id
                and document["prompt_version"] == message.prompt_version
            )
            turns = document["turns"] + 1 if same and document is not None else 1
            created = document["created_at"] if same and document is not None else now
            self._sessions.put(
                txn,
                key,
                {
                    "native_id": message.native_id,
                    "turns": turns,
                    "created_at": created,
                    "updated_at": now,
                    "prompt_version": message.prompt_version,
                },
            )

        self._store.write(write)
        return Done()

    def _forget(self, key: str) -> Forgotten:
        existed = self._store.write(lambda txn: self._sessions.delete(txn, key.encode()))
        return Forgotten(key=key, existed=existed)
