"""What a status says of the actors: every one by name, those stopped,
restarted or with messages waiting.

Asked on every status request, and looking at each actor in Python (its
slot, its ref, whether it stopped, its mailbox) cost about 3,000
instructions an actor, most of a status request's own work. Between two
requests the actors are nearly always the same ones, running and idle: so
the names, restarts and what to look at are kept, made again only after the
supervisor changed a slot (``changed``), and a request only asks each
mailbox its size and each actor whether it stopped, in C loops. Anything
out of the ordinary (an actor stopped or with messages waiting) is looked
at actor by actor, as before.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from enact.actors._specs import ActorSlot

_SIZE = operator.methodcaller("qsize")
_STOPPED = operator.methodcaller("is_set")

Summary = tuple[tuple[str, ...], tuple[str, ...], dict[str, int], dict[str, int]]
"""Every actor by name, those not running, each restarted one's restarts and
each one's waiting messages where not 0."""


class _Seen(NamedTuple):
    version: int
    names: tuple[str, ...]
    restarts: dict[str, int]
    starting_only: bool
    """No actor without a ref is stopping: each is being started, so running."""
    stopped_events: tuple[Any, ...]
    mailboxes: tuple[Any, ...]


class Roster:
    def __init__(self, slots: dict[str, ActorSlot]) -> None:
        self._slots = slots
        self._version = 0
        self._seen: _Seen | None = None

    def changed(self) -> None:
        """A slot was added or removed, or its ref, restarts or stopping changed:
        called after the change, so a summary made before it is not kept."""
        self._version += 1

    def summary(self) -> Summary:
        seen = self._seen
        if seen is None or seen.version != self._version:
            seen = self._seen = self._look()
        if (seen.starting_only and not any(map(_STOPPED, seen.stopped_events))
                and not any(map(_SIZE, seen.mailboxes))):
            return seen.names, (), dict(seen.restarts), {}
        return walk(sorted(self._slots.items()))

    def _look(self) -> _Seen:
        version = self._version  # first: a change from now on is seen by the next summary
        slots = sorted(self._slots.items())  # one C-level step: a pool may add or retire a slot meanwhile
        refs = [slot.ref for _, slot in slots if slot.ref is not None]
        return _Seen(
            version=version,
            names=tuple([name for name, _ in slots]),
            restarts={name: slot.restarts for name, slot in slots if slot.restarts},
            starting_only=not any(slot.stopping for _, slot in slots if slot.ref is None),
            stopped_events=tuple([ref.actor_stopped for ref in refs]),
            mailboxes=tuple([ref.actor_inbox for ref in refs]),
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
