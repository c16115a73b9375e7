"""Idle reads: a read-only request answered in the asker's thread while the
actor that owns the data has nothing to do.

An ask crosses two threads (about 60 µs here, as long as a whole round trip
on the control socket), and a read of committed state does not need the
actor's thread: LMDB gives any thread a consistent read transaction. So an
actor may declare, for a request that only reads, a reader: its own code,
over its own databases, touching none of its in-memory state. The
supervisor calls the reader instead of asking when the actor is idle: every
message ever put in its mailbox has been handled and nothing it staged is
waiting for a commit. Then its committed state is exactly what the actor
would read once it reached the request in its mailbox (actors flush their
batch before a read), so the reply is the one an ask would get, without the
hop. When the actor is busy the request is asked as before, behind the
messages sent to it first.

Idle is told without a race: the mailbox counts what was put in it
(``CountingInbox``, counting each message before it is queued), the actor
counts what it finished handling, and the reader checks that the second has
caught up with the first, reading the handled count before the sent count
(both only grow).

The last answer of each reader is kept with the handled count it was read
at: asked the same request again while the actor is idle and has handled
nothing since, the committed state is the one read then (only the actor
writes its databases, and only while it handles a message), so the answer
is given again without reading (a poll of one outcome, a status's spending
asked again after some other actor did something). A reader reads the actor's committed state alone,
as declared, so nothing else can change its answer.

A supervisor's actors' activity is counted too (``ActorActivity``), for a
reader of many actors at once (a status): while the count stays the same,
no message was put in or taken from any mailbox, none was handled, no
actor's thread ended and no slot changed, so what was gathered of them
then is what would be gathered now.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

M = TypeVar("M")

Reader = Callable[[Any], object]

NOT_IDLE = object()
"""What ``IdleReads.answer`` returns when the request must be asked."""


class ActorActivity:
    """How often anything a status says of one supervisor's actors may have
    changed: a message put in a mailbox, taken from one or handled (and
    whatever its handling changed), an actor's thread ended, a slot changed.
    Each is counted after the change, so a reader that reads ``count``
    first and finds it the same next time knows that what it gathered in
    between is still so.

    Each change stores a number never stored before (the next of a
    counter, one step in C): two changes may store theirs out of order, but
    the count never comes back to a number a reader kept, which a ``+=``
    that lost an increment could. No lock: a mailbox's put takes none, so
    the actor it wakes never waits on one its sender still holds."""

    __slots__ = ("_numbers", "count")

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self.count = 0

    def changed(self) -> None:
        self.count = next(self._numbers)


class CountingInbox(queue.SimpleQueue[Any]):
    """An actor's mailbox that counts every message put in it.

    A ``SimpleQueue``, whose put, get and empty are C: a ``queue.Queue``
    costs a dozen Python calls and three condition operations per message,
    and an actor needs none of its extras (a bound, ``join``). Each put is
    counted, under a lock of its own, before it is queued, so ``sent`` is
    never behind what the actor can take; and in its supervisor's
    ``activity`` after, so a reader of the mailbox's size that read that
    count before the message was queued reads another one next time."""

    def __init__(self, activity: ActorActivity) -> None:
        super().__init__()
        self.sent = 0
        self._counting = threading.Lock()
        self._activity = activity

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self._counting:
            self.sent += 1
        super().put(item)
        self._activity.changed()


class IdleReads:
    """One actor incarnation's readers and how far it has got."""

    def __init__(self, inbox: CountingInbox, *, staged: Callable[[], bool]) -> None:
        self._inbox = inbox
        self._staged = staged
        self._readers: dict[type[Any], Reader] = {}
        self._last: dict[type[Any], tuple[int, object, object]] = {}
        """Each reader's last answer: (handled count, request, reply)."""
        self.handled = 0
        """Messages taken from the mailbox and fully handled (the batch
        committed when the mailbox ran empty), counted by the actor's thread."""

    def declare(self, request_type: type[M], reader: Callable[[M], object]) -> None:
        self._readers[request_type] = reader

    def answer(self, message: object) -> object:
        """The reader's reply to ``message`` if the actor is idle, else ``NOT_IDLE``."""
        reader = self._readers.get(type(message))
        if reader is None:
            return NOT_IDLE
        handled = self.handled  # first: a message handled after this is one sent after it, or counted below
        if self._inbox.sent != handled or self._staged():
            return NOT_IDLE
        last = self._last.get(type(message))
        if last is not None and last[0] == handled and (last[1] is message or last[1] == message):
            return last[2]
        reply = reader(message)
        self._last[type(message)] = (handled, message, reply)  # one store: another thread reads a whole tuple
        return reply
