"""The task queue's databases, their keys, and the walks over them.

- ``tasks.queue``: task id (8 bytes, big-endian) → ``Task``.
- ``tasks.events``: an append log of ``TaskEvent`` (cursor = sequence).
- ``tasks.index``: ``k<idempotency key>`` → task id; ``s<state>\\0<id>`` for
  each task (listing by state, finding queued and running tasks);
  ``e<id><sequence>`` for each event (one task's events by cursor).
- ``tasks.notices``: notice id → the ``inbox.Notify`` telling the owner a
  task's outcome, from the commit that ended the task until the inbox says
  it holds the notice (told again at start and every lease TTL until then).
- ``tasks.experience``: task id → the ``Experience`` a task that succeeded
  with a change left, stored by the commit that ended it.

Every function here runs inside a transaction its caller opened, so a
change and its index entries commit together.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import lmdb

from enact.messages.inbox import Notify
from enact.messages.tasks import EventAt
from enact.storage import AppendLog, RecordTable, Store
from enact.tasks.records import Experience, Task, TaskEvent, TaskState

QUEUE = "tasks.queue"
EVENTS = "tasks.events"
INDEX = "tasks.index"
NOTICES = "tasks.notices"
EXPERIENCE = "tasks.experience"
DATABASES = (QUEUE, EVENTS, INDEX, NOTICES, EXPERIENCE)

TASK_VERSION = 2
_ID = struct.Struct(">Q")
_KEY = b"k"
_STATE = b"s"
_EVENT = b"e"
_LAST_ID = b"\xff" * 8


def _id_key(task_id: int) -> bytes:
    return _ID.pack(task_id)


def _state_prefix(state: TaskState) -> bytes:
    return _STATE + state.value.encode() + b"\0"


class TaskTables:
    def __init__(self, store: Store) -> None:
        # Version 2 added the owner's unlocks (``Task.allow_paths``,
        # ``allow_fewer_tests``): version 1 records read as having none,
        # and an older enact refuses a version 2 record by its number.
        self._tasks = RecordTable(store.table(QUEUE, version=TASK_VERSION), Task)
        self._queue = store.table(QUEUE).handle
        self._log = store.log(EVENTS)
        self._events = RecordTable(self._log, TaskEvent)
        self._index = store.table(INDEX).handle
        self._notices = RecordTable(store.table(NOTICES), Notify)
        self._experience = RecordTable(store.table(EXPERIENCE), Experience)

    # -- tasks --------------------------------------------------------------

    def keep_experience(self, txn: lmdb.Transaction, experience: Experience) -> None:
        self._experience.put(txn, _id_key(experience.task_id), experience)

    def experience(self, txn: lmdb.Transaction, task_id: int) -> Experience | None:
        return self._experience.get(txn, _id_key(task_id))

    def get(self, txn: lmdb.Transaction, task_id: int) -> Task | None:
        return self._tasks.get(txn, _id_key(task_id))

    def next_id(self, txn: lmdb.Transaction) -> int:
        cursor = txn.cursor(db=self._queue)
        return int(_ID.unpack(cursor.key())[0]) + 1 if cursor.last() else 1

    def save(self, txn: lmdb.Transaction, before: Task | None, task: Task) -> None:
        """Store ``task`` (``before``: as it was) and move its state entry."""
        key = _id_key(task.id)
        if before is not None and before.state is not task.state:
            txn.delete(_state_prefix(before.state) + key, db=self._index)
        if before is None or before.state is not task.state:
            txn.put(_state_prefix(task.state) + key, b"", db=self._index)
        self._tasks.put(txn, key, task)

    def by_key(self, txn: lmdb.Transaction, idempotency_key: str) -> Task | None:
        raw = txn.get(_KEY + idempotency_key.encode(), db=self._index)
        return None if raw is None else self._tasks.get(txn, bytes(raw))

    def claim_key(self, txn: lmdb.Transaction, idempotency_key: str, task_id: int) -> None:
        txn.put(_KEY + idempotency_key.encode(), _id_key(task_id), db=self._index)

    def ids_in_state(self, txn: lmdb.Transaction, state: TaskState, *, newest_first: bool = False,
                     before: int | None = None) -> Iterator[int]:
        prefix = _state_prefix(state)
        cursor = txn.cursor(db=self._index)
        if newest_first:
            # set_range lands on the first key at or after the start: step back from there.
            found = cursor.set_range(prefix + (_id_key(before) if before is not None else _LAST_ID))
            found = cursor.prev() if found else cursor.last()
            while found and bytes(cursor.key()).startswith(prefix):
                yield int(_ID.unpack(bytes(cursor.key())[len(prefix):])[0])
                found = cursor.prev()
            return
        if not cursor.set_range(prefix):
            return
        for raw in cursor.iternext(values=False):
            key = bytes(raw)
            if not key.startswith(prefix):
                return
            yield int(_ID.unpack(key[len(prefix):])[0])

    def in_state(self, txn: lmdb.Transaction, state: TaskState) -> list[Task]:
        """Oldest first; read in full before the caller changes any of them."""
        found = (self.get(txn, task_id) for task_id in list(self.ids_in_state(txn, state)))
        return [task for task in found if task is not None]

    def page(self, txn: lmdb.Transaction, state: TaskState | None, limit: int,
             before: int | None) -> tuple[list[Task], bool]:
        """Up to ``limit`` tasks older than ``before``, newest first, and
        whether more follow."""
        ids: list[int] = []
        if state is not None:
            for task_id in self.ids_in_state(txn, state, newest_first=True, before=before):
                ids.append(task_id)
                if len(ids) > limit:
                    break
        else:
            cursor = txn.cursor(db=self._queue)
            found = cursor.prev() if before is not None and cursor.set_range(_id_key(before)) else cursor.last()
            while found and len(ids) <= limit:
                ids.append(int(_ID.unpack(cursor.key())[0]))
                found = cursor.prev()
        tasks = [task for task in (self.get(txn, task_id) for task_id in ids[:limit]) if task is not None]
        return tasks, len(ids) > limit

    # -- owner notices ------------------------------------------------------

    def hold_notice(self, txn: lmdb.Transaction, notice: Notify) -> None:
        self._notices.put(txn, notice.notice_id.encode(), notice)

    def drop_notice(self, txn: lmdb.Transaction, notice_id: str) -> bool:
        return self._notices.delete(txn, notice_id.encode())

    def held_notices(self, txn: lmdb.Transaction) -> list[Notify]:
        return [notice for _, notice in self._notices.items(txn)]

    # -- events -------------------------------------------------------------

    def append_event(self, txn: lmdb.Transaction, event: TaskEvent) -> int:
        sequence = self._log.last_cursor(txn) + 1
        self._events.put(txn, AppendLog.key(sequence), event)
        txn.put(_EVENT + _id_key(event.task_id) + _ID.pack(sequence), b"", db=self._index)
        return sequence

    def _event_at(self, txn: lmdb.Transaction, sequence: int) -> EventAt | None:
        event = self._events.get(txn, AppendLog.key(sequence))
        return None if event is None else EventAt(cursor=sequence, event=event)

    def _sequences(self, txn: lmdb.Transaction, task_id: int | None, cursor: int) -> Iterator[int]:
        if task_id is None:
            for sequence, _ in self._log.iterate_from(txn, cursor):
                yield sequence
            return
        prefix = _EVENT + _id_key(task_id)
        position = txn.cursor(db=self._index)
        if not position.set_range(prefix + _ID.pack(cursor + 1)):
            return
        for raw in position.iternext(values=False):
            key = bytes(raw)
            if not key.startswith(prefix):
                return
            yield int(_ID.unpack(key[len(prefix):])[0])

    def events(self, txn: lmdb.Transaction, task_id: int | None, cursor: int,
               limit: int) -> tuple[list[EventAt], bool]:
        """Events after ``cursor``, oldest first, of one task or of all; and
        whether more follow."""
        found: list[EventAt] = []
        for sequence in self._sequences(txn, task_id, cursor):
            if len(found) == limit:
                return found, True
            event = self._event_at(txn, sequence)
            if event is not None:
                found.append(event)
        return found, False

    def newest_events(self, txn: lmdb.Transaction, task_id: int, limit: int) -> list[EventAt]:
        """The newest ``limit`` events of one task, oldest first."""
        prefix = _EVENT + _id_key(task_id)
        position = txn.cursor(db=self._index)
        found = position.set_range(_EVENT + _id_key(task_id + 1))
        found = position.prev() if found else position.last()
        sequences: list[int] = []
        while found and len(sequences) < limit:
            key = bytes(position.key())
            if not key.startswith(prefix):
                break
            sequences.append(int(_ID.unpack(key[len(prefix):])[0]))
            found = position.prev()
        events = (self._event_at(txn, sequence) for sequence in reversed(sequences))
        return [event for event in events if event is not None]

    def changed_since(self, txn: lmdb.Transaction, after: int, limit: int) -> tuple[list[int], int, bool]:
        """The ids of up to ``limit`` tasks with events after ``after``, in
        the order of the first such event; the cursor up to which every event
        belongs to one of them; and whether events follow it."""
        ids: dict[int, None] = {}
        cursor = after
        for sequence, document in self._log.iterate_from(txn, after):
            task_id = int(document["task_id"])
            if task_id not in ids and len(ids) == limit:
                return list(ids), cursor, True
            ids[task_id] = None
            cursor = sequence
        return list(ids), cursor, False
