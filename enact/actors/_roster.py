"""What a status says of the actors: every one by name, those stopped,
restarted or with messages waiting.

Asked on every status request, and looking at each actor in Python (its
slot, its ref, whether it stopped, its mailbox) cost about 3,000
instructions an actor, most of a status request's own work; even a bare
call per actor costs about 1,000. Between two requests the actors are
nearly always the same ones, running and idle: so the names, restarts and
what to look at are kept, made again only after the supervisor changed a
slot (``changed``), and a request reads each mailbox's size and each
actor's stopped flag in C (``map`` over the mailboxes' ``qsize`` and the
events' flag). Anything out of the ordinary (an actor stopped or with
messages waiting), or an actor whose mailbox or stop event is not of the
kind read that way, is looked at actor by actor, as before. Each change
to a slot is also counted in the actors' ``ActorActivity``, after which a
status gathers its summary again.
"""

from __future__ import annotations

import operator
import queue
import threading
from typing import Any, NamedTuple

from enact.actors._idle_reads import ActorActivity
from enact.actors._specs import ActorSlot

_SIZE = queue.SimpleQueue.qsize
_STOPPED = operator.attrgetter("_flag")
"""What ``threading.Event.is_set`` returns, read without its Python call
(CPython's ``Event`` keeps it there; an event without it is walked)."""

Summary = tuple[tuple[str, ...], tuple[str, ...], dict[str, int], dict[str, int]]
"""Every actor by name, those not running, each restarted one's restarts and
each one's waiting messages where not 0."""


class _Seen(NamedTuple):
    version: int
    names: tuple[str, ...]
    restarts: dict[str, int]
    readable: bool
    """No actor without a ref is stopping (each is being started, so running),
    and every mailbox is a ``SimpleQueue`` and every stop event an ``Event`` with its flag."""
    stopped_events: tuple[Any, ...]
    mailboxes: tuple[Any, ...]


class Roster:
    def __init__(self, slots: dict[str, ActorSlot], activity: ActorActivity) -> None:
        self._slots = slots
        self._activity = activity
        self._version = 0
        self._seen: _Seen | None = None

    def changed(self) -> None:
        """A slot was added or removed, or its ref, restarts or stopping changed:
        called after the change, so a summary made before it is not kept."""
        self._version += 1
        self._activity.changed()

    def summary(self) -> Summary:
        seen = self._seen
        if seen is None or seen.version != self._version:
            seen = self._seen = self._look()
        if seen.readable and not any(map(_STOPPED, seen.stopped_events)) and not any(map(_SIZE, seen.mailboxes)):
            return seen.names, (), dict(seen.restarts), {}
        return walk(sorted(self._slots.items()))

    def _look(self) -> _Seen:
        version = self._version  # first: a change from now on is seen by the next summary
        slots = sorted(self._slots.items())  # one C-level step: a pool may add or retire a slot meanwhile
        refs = [slot.ref for _, slot in slots if slot.ref is not None]
        events = tuple([ref.actor_stopped for ref in refs])
        mailboxes = tuple([ref.actor_inbox for ref in refs])
        return _Seen(
            version=version,
            names=tuple([name for name, _ in slots]),
            restarts={name: slot.restarts for name, slot in slots if slot.restarts},
            readable=(not any(slot.stopping for _, slot in slots if slot.ref is None)
                      and all(isinstance(mailbox, queue.SimpleQueue) for mailbox in mailboxes)
                      and all(type(event) is threading.Event and isinstance(getattr(event, "_flag", None), bool)
                              for event in events)),
            stopped_events=events,
            mailboxes=mailboxes,
        )


def walk(slots: list[tuple[str, ActorSlot]]) -> Summary:
    """The summary, looking at each actor."""
    stopped: list[str] = []
    restarts: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for name, slot in slots:
        ref: Any = slot.ref
        if down(slot):
            stopped.append(name)
        elif ref is not None and (queued := ref.actor_inbox.qsize()):
            waiting[name] = queued
        if slot.restarts:
            restarts[name] = slot.restarts
    return tuple([name for name, _ in slots]), tuple(stopped), restarts, waiting


def down(slot: ActorSlot) -> bool:
    """Whether the actor of ``slot`` is not running: one still being started
    (a pool child spawned on demand has no ref yet) counts as running."""
    ref: Any = slot.ref
    return slot.stopping if ref is None else bool(ref.actor_stopped.is_set())
