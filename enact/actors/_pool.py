"""Keyed pools: one child actor per key (a conversation, later a task
worker), spawned on demand, retired once idle, restarted on failure like any
supervised actor.

The pool belongs to the supervisor, not to the actor that feeds it, so what it
knows — which work each child has in hand — outlives a restart of that actor:
a restarted inbox asks ``running`` instead of dispatching an event twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from enact.actors._asks import ActorNotFound

if TYPE_CHECKING:
    from enact.actors.supervisor import ActorSpec, Supervisor
    from enact.clock import Timer


@dataclass(slots=True)
class _Child:
    work: set[str] = field(default_factory=set)
    last_active: float = 0.0


class KeyedPool:
    def __init__(
        self, supervisor: Supervisor, *, family: str, spec_of: Callable[[str], ActorSpec], idle_s: float
    ) -> None:
        self.family = family
        self._supervisor = supervisor
        self._spec_of = spec_of
        self._idle_s = idle_s
        self._children: dict[str, _Child] = {}
        self._running: dict[str, str] = {}  # work id -> key
        self._lock = threading.Lock()
        self._timer: Timer | None = None

    def name_of(self, key: str) -> str:
        return f"{self.family}:{key}"

    def tell(self, key: str, work: str, message: object) -> None:
        """Hand ``work`` to the child for ``key``, starting it if need be;
        the work counts as running until ``done``."""
        with self._lock:
            child = self._children.setdefault(key, _Child())
            child.work.add(work)
            child.last_active = self._supervisor.clock.monotonic()
            self._running[work] = key
        self._schedule_idle_check()
        name = self.name_of(key)
        try:
            if not self._supervisor.running(name):  # its spec is made only to start it
                self._supervisor.spawn(self._spec_of(key), family=self.family)
            try:
                self._supervisor.tell(name, message)
            except ActorNotFound:  # retired between the spawn and the tell
                self._supervisor.spawn(self._spec_of(key), family=self.family)
                self._supervisor.tell(name, message)
        except BaseException:
            self.done(work)
            raise

    def done(self, work: str) -> None:
        """The work is finished (or failed): its child may become idle."""
        with self._lock:
            key = self._running.pop(work, None)
            child = None if key is None else self._children.get(key)
            if child is not None:
                child.work.discard(work)
                child.last_active = self._supervisor.clock.monotonic()

    def running(self, work: str) -> bool:
        with self._lock:
            return work in self._running

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._children)

    def retire_idle(self) -> list[str]:
        """Retire every child with no work for ``idle_s``; their keys."""
        now = self._supervisor.clock.monotonic()
        with self._lock:
            idle = [key for key, child in self._children.items()
                    if not child.work and now - child.last_active >= self._idle_s]
            for key in idle:
                del self._children[key]
        for key in idle:
            self._supervisor.retire(self.name_of(key))
        return idle

    def _schedule_idle_check(self) -> None:
        if self._timer is not None:  # read without the lock: set below, under it, and cleared only by the check
            return
        with self._lock:
            if self._timer is not None or self._supervisor.stopping:
                return
            self._timer = self._supervisor.clock.call_later(max(0.05, self._idle_s / 2), self._check)

    def _check(self) -> None:
        with self._lock:
            self._timer = None
        if self._supervisor.stopping:
            return
        self.retire_idle()
        with self._lock:
            pending = bool(self._children)
        if pending:
            self._schedule_idle_check()
