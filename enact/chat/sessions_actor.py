"""Runtime sessions: session key to the runtime's native session id.

A mapping written under another prompt version reads as absent (and is left
in place, so rolling back the prompt finds it again). Writes are grouped per
commit; until a staged write commits, lookups read it from memory, and what
was committed stays in memory too (``enact.chat.kept_tables``). A call's
start (``Open``: its mapping and its notes) is answered in the caller's
thread while the actor is idle.

A forgotten fact (``ForgetFact``) is redacted in every kept history and
resets every native session that may have been given it.

A note (``AddNote``: a task's outcome) waits here for the conversation's
next call, which asks for it (``Notes``) and carries it; the ``Record`` of
that call takes it, in the commit that counts the turn, so it is given once,
whether the daemon restarts before the next turn or not."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

import lmdb

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred, WriteBatch
from enact.chat.kept_tables import KeptTable
from enact.chat.redaction import pattern_of, redact_text
from enact.frozen_dataclass import dataclass
from enact.messages.common import Done, NotFound
from enact.messages.inbox import NoticeTaken
from enact.messages.sessions import (
    MAX_NOTES,
    AddNote,
    FactForgotten,
    Forget,
    ForgetFact,
    Forgotten,
    History,
    HistoryMessage,
    Lookup,
    Note,
    Notes,
    Open,
    Opened,
    PendingNotes,
    ReadHistory,
    Record,
    Session,
)
from enact.runtime.history import trim
from enact.storage import Document

_FORGOTTEN_KEPT = 64
"""Far more forgets than can come during one call (``runtime.timeout_s``)."""

SESSIONS = "runtime.sessions"
HISTORIES = "runtime.histories"
"""Session key -> the message history of a runtime that keeps none (``openai``):
``{"native_id": ..., "messages": [[role, content], ...]}``."""
NOTES = "runtime.notes"
"""Session key -> ``{"pending": [[note id, text], ...], "given": [note id, ...]}``:
the notes for its next call, and the latest given (so one added again is not)."""
DATABASES = (SESSIONS, HISTORIES, NOTES)
_GIVEN_KEPT = 32


class SessionsActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._batch = self.batch = WriteBatch(self._store, owner=context.name)
        self._sessions = KeptTable(self._store, self._store.table(SESSIONS))
        self._histories = KeptTable(self._store, self._store.table(HISTORIES))
        self._notes = KeptTable(self._store, self._store.table(NOTES))
        # Native sessions reset for a forgotten fact: a turn that was running
        # in one when it was reset must not record it again.
        self._reset: set[str] = set()
        # The latest facts forgotten, for the calls that were running then.
        self._forgotten: deque[_Forgotten] = deque(maxlen=_FORGOTTEN_KEPT)
        # Idle, nothing is staged: what a call starts from is what is committed.
        self.idle_reads.declare(Open, self._committed_open)

    def handle(self, message: Any) -> Any:
        match message:
            case Open():
                return self._open(message)
            case Lookup():
                return self._lookup(message)
            case Record():
                return self._record(message)
            case Forget():
                return self._forget(message.key)
            case ReadHistory():
                return self._read_history(message)
            case ForgetFact():
                return self._forget_fact(message)
            case AddNote():
                return self._add_note(message)
            case Notes():
                return self._pending_notes(message.key)
        return super().handle(message)

    def _lookup(self, message: Lookup) -> Session | NotFound:
        if not message.key:
            return NotFound(kind="session", id=message.key)
        document = self._current(message.key.encode())
        if document is None or document["prompt_version"] != message.prompt_version:
            return NotFound(kind="session", id=message.key)
        return Session(key=message.key, **document)

    def _open(self, message: Open) -> Opened:
        mapping = self._lookup(Lookup(key=message.key, prompt_version=message.prompt_version))
        return Opened(key=message.key, session=mapping if isinstance(mapping, Session) else None,
                      notes=self._pending_notes(message.key).notes)

    def _committed_open(self, message: Open) -> Opened:
        """What ``_open`` answers, from the committed tables alone, in one
        read transaction: an idle read (``enact.actors._idle_reads``)."""
        key = message.key.encode()

        def read(txn: lmdb.Transaction) -> tuple[Document | None, Document | None]:
            return self._sessions.table.get(txn, key), self._notes.table.get(txn, key)

        mapping, notes = self._store.read(read) if message.key else (None, None)
        session = (Session(key=message.key, **mapping)
                   if mapping is not None and mapping["prompt_version"] == message.prompt_version else None)
        return Opened(key=message.key, session=session, notes=_notes_of(notes))

    def _current(self, key: bytes) -> Document | None:
        return self._sessions.current(key)

    def _current_history(self, key: bytes) -> Document | None:
        return self._histories.current(key)

    def _current_notes(self, key: bytes) -> Document:
        document = self._notes.current(key)
        return document if document is not None else {"pending": [], "given": []}

    def _pending_notes(self, key: str) -> PendingNotes:
        return PendingNotes(key=key, notes=_notes_of(self._current_notes(key.encode()) if key else None))

    def _add_note(self, message: AddNote) -> Deferred | Done:
        key = message.key.encode()
        notes = self._current_notes(key)
        known = {note_id for note_id, _ in notes["pending"]} | set(notes["given"])
        if not message.key or message.note_id in known:
            self._acknowledge(message)  # held already (or given): the notifier may let go
            return Done()
        pending = [*notes["pending"], [message.note_id, message.text]][-MAX_NOTES:]
        return self._stage_all({}, {}, Done(), notes={key: {**notes, "pending": pending}},
                               then=lambda: self._acknowledge(message))

    def _acknowledge(self, message: AddNote) -> None:
        if message.acknowledge_to:
            self.context.tell(message.acknowledge_to, NoticeTaken(notice_id=message.note_id))

    def _notes_taken(self, key: bytes, given: tuple[str, ...]) -> dict[bytes, Document | None]:
        """The notes of ``key`` once a call carried ``given``: to be staged with its Record."""
        if not given:
            return {}
        notes = self._current_notes(key)
        pending = [note for note in notes["pending"] if note[0] not in given]
        return {key: {"pending": pending, "given": [*notes["given"], *given][-_GIVEN_KEPT:]}}

    def _read_history(self, message: ReadHistory) -> History:
        document = self._current_history(message.key.encode()) if message.key else None
        if document is None or document["native_id"] != message.native_id:
            return History(key=message.key, messages=())
        return History(key=message.key, messages=_messages(document))

    def _stage(self, key: bytes, document: Document | None, reply: object, *,
               history: Document | None = None, with_history: bool = False,
               notes: dict[bytes, Document | None] | None = None, told: bool = False) -> Deferred:
        """Stage the mapping of ``key`` (None deletes it) and, ``with_history``,
        its history in the same commit."""
        return self._stage_all({key: document}, {key: history} if with_history else {}, reply, notes=notes,
                               told=told)

    def _stage_all(self, mappings: dict[bytes, Document | None], histories: dict[bytes, Document | None],
                   reply: object, *, notes: dict[bytes, Document | None] | None = None,
                   then: Callable[[], None] | None = None, told: bool = False) -> Deferred:
        """Stage mappings, histories and notes (None deletes one), in one
        commit; ``then`` runs once it is durable. ``told``: nobody waits for
        it (a call's ``Record``), so it may go into another actor's commit
        (``WriteBatch.stage``)."""
        writes = ((self._sessions, mappings), (self._histories, histories), (self._notes, notes or {}))
        for table, documents in writes:
            table.stage(documents)

        def write(txn: lmdb.Transaction) -> None:
            for table, documents in writes:
                table.write(txn, documents)

        def settle(committed: bool) -> None:
            for table, documents in writes:
                table.settle(documents, committed=committed)

        deferred = Deferred()

        def after(_: None) -> None:
            settle(True)
            if then is not None:
                then()
            deferred.resolve(reply)

        def failed(error: Exception) -> None:
            settle(False)
            deferred.fail(error)

        self._batch.stage(write, after, failed=failed, told=told)
        return deferred

    def _record(self, message: Record) -> Done | Deferred:
        if not message.key:
            return Done()  # isolated calls keep no mapping
        key = message.key.encode()
        notes = self._notes_taken(key, message.notes_given)
        if message.native_id in self._reset or not message.native_id:
            # A reset session is not brought back; the notes it carried were given all the same.
            return self._stage_all({}, {}, Done(), notes=notes) if notes else Done()
        now = self.context.clock.time()
        document = self._current(key)
        same = (
            document is not None
            and document["native_id"] == message.native_id
            and document["prompt_version"] == message.prompt_version
        )
        # A fact forgotten while this call ran may be in it: its native
        # session is not kept (resumed, the forget found it not used since
        # the fact existed); its exchange is redacted.
        late = [forgot for forgot in self._forgotten if message.context_at and message.context_at < forgot.at]
        if late and not message.exchange:
            self._reset.add(message.native_id)
            mapped = document is not None and document["native_id"] == message.native_id
            if mapped or notes:
                return self._stage_all({key: None} if mapped else {}, {}, Done(), notes=notes)
            return Done()
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
            return self._stage(key, updated, Done(), notes=notes, told=True)
        previous = self._current_history(key)
        kept = _messages(previous) if previous is not None and previous["native_id"] == message.native_id else ()
        exchange = tuple(HistoryMessage(role=m.role, content=_redacted(m.content, late)) for m in message.exchange)
        messages = trim((*kept, *exchange), message.history_chars)
        history = {"native_id": message.native_id, "messages": [[m.role, m.content] for m in messages]}
        return self._stage(key, updated, Done(), history=history, with_history=True, notes=notes, told=True)

    def _forget(self, key: str) -> Deferred:
        existed = self._current(key.encode()) is not None
        return self._stage(key.encode(), None, Forgotten(key=key, existed=existed), with_history=True)


    def _forget_fact(self, message: ForgetFact) -> Deferred | FactForgotten:
        """Redact the kept histories, reset the native sessions used since the
        fact existed (any of them may have been given it; a reset costs a
        fresh session, keeping one would send the fact again)."""
        pattern = pattern_of(message.texts)
        if pattern is not None:
            forgotten_at = self.context.clock.time()
            self._forgotten.append(_Forgotten(at=forgotten_at, pattern=pattern, tombstone=message.tombstone))
        self._batch.flush()  # LMDB holds every staged write: read it alone
        sessions, histories = self._store.read(
            lambda txn: (dict(self._sessions.table.items(txn)), dict(self._histories.table.items(txn))))
        redacted: dict[bytes, Document | None] = {}
        for key, history in histories.items():
            if pattern is None:
                break
            messages = [[role, redact_text(content, pattern, message.tombstone)]
                        for role, content in history["messages"]]
            if messages != history["messages"]:
                redacted[key] = {**history, "messages": messages}
        reset: dict[bytes, Document | None] = {
            key: None for key, mapping in sessions.items()
            if key not in histories and mapping["updated_at"] >= message.since
        }
        self._reset.update(sessions[key]["native_id"] for key in reset)
        reply = FactForgotten(histories=len(redacted), sessions=len(reset))
        if not redacted and not reset:
            return reply
        return self._stage_all(reset, redacted, reply)


@dataclass(frozen=True, slots=True)
class _Forgotten:
    at: float
    pattern: re.Pattern[str]
    tombstone: str


def _redacted(text: str, forgotten: list[_Forgotten]) -> str:
    for forgot in forgotten:
        text = redact_text(text, forgot.pattern, forgot.tombstone)
    return text


def _notes_of(document: Document | None) -> tuple[Note, ...]:
    pending = document["pending"] if document is not None else []
    return tuple(Note(note_id=note_id, text=text) for note_id, text in pending)


def _messages(document: Document) -> tuple[HistoryMessage, ...]:
    return tuple(HistoryMessage(role=role, content=content) for role, content in document["messages"])
