"""The daemon's one mailbox actor on the Ray cluster
(``enact.tasks.remote_mailbox.Mailbox``), shared by all its remote attempts
(``enact.tasks.ray_backend``), each under its own key.

An actor is a process of its own on the cluster, whose start would cost
each attempt a second or more: so one per daemon, kept for its attempts,
not one per worker slot. It is threaded, with a thread for every call all
the slots may have under way at once (``tasks.ray.workers``). Each attempt
opens its key in it before the node starts and closes it however the
attempt ended, so the mailbox keeps nothing of an ended attempt. A mailbox
the cluster lost is made again for the next attempt; the lost one is killed
(should it live on, unreachable) once no attempt uses it, never while
another attempt does. The daemon's stop kills it (``stop_mailbox``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError

from enact.tasks.remote_mailbox import Mailbox

log = logging.getLogger(__name__)

_MailboxActor = ray.remote(Mailbox)
_CALLS_PER_ATTEMPT = 4
"""The mailbox calls one attempt may have under way at once, each in a
thread of the actor's: the node's attempt and heartbeat threads waiting in
their asks, the relay's look, an answer on its way."""


@dataclass(slots=True, eq=False)  # each one itself: found in the lost list by identity
class _MailboxHeld:
    """One mailbox actor, and how many attempts have their key open in it."""

    actor: Any
    name: str
    users: int = 0
    lost: bool = False


class SharedMailbox:
    """The daemon's mailbox actor, made when the first attempt needs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: _MailboxHeld | None = None
        self._lost: list[_MailboxHeld] = []

    def open(self, key: str, *, workers: int) -> _MailboxHeld:
        """The mailbox with ``key`` open in it, made if there is none yet or
        the cluster lost it. Raises RayError."""
        try:
            return self._opened(self._use(workers), key)
        except RayActorError as error:  # lost since the last attempt: once more, in one made again
            log.warning("the mailbox actor is lost on the cluster (%s): another is made", first_line(error))
        return self._opened(self._use(workers), key)

    def _opened(self, held: _MailboxHeld, key: str) -> _MailboxHeld:
        try:
            ray.get(held.actor.open.remote(key))
        except RayError as error:
            self._release(held, lost=isinstance(error, RayActorError))
            raise
        return held

    def close(self, held: _MailboxHeld, key: str) -> None:
        """``key`` closed: the mailbox keeps nothing of its attempt. One that
        cannot be reached is lost: the next attempt makes another."""
        try:
            ray.get(held.actor.close.remote(key))
        except RayError as error:
            log.warning("the mailbox actor is lost on the cluster: %s", first_line(error))
            self._release(held, lost=True)
            return
        self._release(held, lost=False)

    def _use(self, workers: int) -> _MailboxHeld:
        with self._lock:
            if self._current is None:
                # Named by the daemon (host and pid) for whoever looks at the cluster's actors.
                name = f"enact-mailbox-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
                self._current = _MailboxHeld(_MailboxActor.options(
                    name=name, num_cpus=0, max_restarts=0,
                    max_concurrency=_CALLS_PER_ATTEMPT * workers + 2).remote(), name)
            self._current.users += 1
            return self._current

    def _release(self, held: _MailboxHeld, *, lost: bool) -> None:
        with self._lock:
            held.users -= 1
            if lost and not held.lost:
                held.lost = True
                self._lost.append(held)
                if self._current is held:
                    self._current = None
            ended = held.users == 0 and held in self._lost  # not one the stop already killed
            if ended:
                self._lost.remove(held)
        if ended:
            _kill(held.actor)

    def stop(self) -> None:
        """The daemon stops: every mailbox actor it made ends."""
        with self._lock:
            every = [*self._lost, *([self._current] if self._current is not None else [])]
            self._current = None
            self._lost.clear()
            for held in every:
                held.lost = True
        for held in every:
            log.info("the mailbox actor %s ends with the daemon", held.name)
            _kill(held.actor)


def _kill(actor: Any) -> None:
    with contextlib.suppress(RayError, ValueError):  # already gone
        ray.kill(actor, no_restart=True)


MAILBOX = SharedMailbox()


def stop_mailbox() -> None:
    """At the daemon's stop, after its workers: the mailbox actor goes."""
    MAILBOX.stop()


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
