"""The owner notices of ended tasks, held until the inbox has them.

A task that came from chat tells its owner how it ended (``inbox.Notify``).
The notice is held in ``tasks.notices`` by the very commit that ends the
task, handed to the actor for the inbox once that commit is durable, and
dropped when the inbox says it holds it (``inbox.NoticeTaken``): a crash
between the two loses none. One the inbox has not taken within a lease TTL
is handed out again (the inbox takes a notice once per id, so a repeat tells
the owner nothing twice).
"""

from __future__ import annotations

import lmdb

from enact.messages.inbox import Notify
from enact.storage import Store
from enact.tasks.from_chat import outcome_notice
from enact.tasks.records import Task
from enact.tasks.tables import TaskTables


class OwnerNotices:
    """Runs inside the task queue's write transactions; no threads."""

    def __init__(self, store: Store, tables: TaskTables, *, lease_ttl_s: float) -> None:
        self._store = store
        self._tables = tables
        self._lease_ttl_s = lease_ttl_s
        self._ready: list[Notify] = []
        self._staged: list[tuple[Notify, float]] = []
        self._told_at: dict[str, float] = {}
        """When each held notice was last handed out for the inbox (by id)."""

    # -- inside the queue's write transaction ----------------------------------

    def begin(self) -> None:
        """A write transaction starts (or starts over after the map grew)."""
        self._staged.clear()

    def hold(self, txn: lmdb.Transaction, task: Task, now: float) -> None:
        """In the transaction that saves ``task``: hold its notice, if it ended one."""
        notice = outcome_notice(task)
        if notice is not None:
            self._tables.hold_notice(txn, notice)
            self._staged.append((notice, now))

    def committed(self) -> None:
        """The transaction is durable: what it held may be told."""
        self._ready.extend(notice for notice, _ in self._staged)
        self._told_at.update((notice.notice_id, now) for notice, now in self._staged)
        self._staged.clear()

    # -- for the actor ---------------------------------------------------------

    def take(self) -> list[Notify]:
        """The notices to tell the inbox now (committed, or due again)."""
        notices, self._ready = self._ready, []
        return notices

    def retell(self, now: float) -> int:
        """Hand out again, with the next ``take``, the held notices not told
        within a lease TTL (all of them the first time: at start). The inbox
        may have lost one: it restarted with the notice in its mailbox, or the
        write storing it failed. Returns how many."""
        held = self.held()
        for stale in self._told_at.keys() - {notice.notice_id for notice in held}:
            del self._told_at[stale]  # taken meanwhile
        told_at = self._told_at
        due = [notice for notice in held
               if notice.notice_id not in told_at or now - told_at[notice.notice_id] >= self._lease_ttl_s]
        self._ready.extend(due)
        self._told_at.update((notice.notice_id, now) for notice in due)
        return len(due)

    def taken(self, notice_id: str) -> None:
        """The inbox holds the notice: it is not told again."""
        if any(notice.notice_id == notice_id for notice in self.held()):
            self._store.write(lambda txn: self._tables.drop_notice(txn, notice_id))
        self._told_at.pop(notice_id, None)

    def held(self) -> list[Notify]:
        """The notices the inbox has not said it holds (a crash, or the inbox
        restarting, between a task's end and telling it)."""
        notices: list[Notify] = self._store.read(self._tables.held_notices)
        return notices
