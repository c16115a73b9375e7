"""The mailbox between a daemon and the nodes that run its remote attempts:
the node's messages and the daemon's answers, addressed by each attempt's
own key; free of Ray (``enact.tasks.ray_backend`` runs it as one threaded
Ray actor per daemon, shared by all the daemon's attempts).

The daemon opens an attempt's key before the node can ask and closes it
once the attempt has ended, however it ended: closing drops what the
attempt left (messages not taken, answers not fetched) and wakes its asks,
and from then on the mailbox keeps nothing for that key. A node still
asking under a closed key (its process not yet cancelled) is told at once
that its attempt is over. So one attempt never sees another's messages or
answers, and no attempt leaves anything a later one could read.
"""

from __future__ import annotations

import threading
from typing import Any

from enact.frozen_dataclass import dataclass

ANSWER_WAIT_S = 30.0
"""How long the node waits for the daemon's answer to one message; past it
the ask fails as an unavailable actor's does (a heartbeat just tries again)."""
ATTEMPT_OVER = "the attempt is over"
"""The answer to a node that asks under a key the daemon has closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    key: str
    """The attempt's own key: the mailbox serves many attempts, an answer goes to its own."""
    seq: int
    target: str
    message: Any
    log: bytes = b""
    """The node's task log written since the previous envelope."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    reply: Any = None
    unavailable: str = ""
    """Set: the ask fails with ActorUnavailable and this text."""
    cancel: str = ""
    """Set: the daemon cancels the attempt, for this reason (it is stopping)."""


class _Slot:
    """One open attempt's part of the mailbox; its condition shares the
    mailbox's lock, so a post wakes only this attempt's waiters."""

    def __init__(self, lock: threading.Lock) -> None:
        self.changed = threading.Condition(lock)
        self.inbox: list[Envelope] = []
        self.waiting: set[int] = set()
        """The sequence numbers whose asks wait: an answer to no waiting ask is not kept."""
        self.answers: dict[int, Answer] = {}
        self.closed = False


class Mailbox:
    """Messages from the nodes and the daemon's answers, one slot per open
    attempt; the body of a threaded Ray actor both sides call (an ask waits
    for its answer in its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def open(self, key: str) -> None:
        """The daemon's side, before the attempt starts: its messages may come."""
        with self._lock:
            self._slots.setdefault(key, _Slot(self._lock))

    def close(self, key: str) -> None:
        """The daemon's side, once the attempt has ended: what it left goes,
        and its asks still waiting are told the attempt is over."""
        with self._lock:
            slot = self._slots.pop(key, None)
            if slot is not None:
                slot.closed = True
                slot.changed.notify_all()

    def ask(self, envelope: Envelope, wait_s: float = ANSWER_WAIT_S) -> Answer | None:
        """The node's side: post and wait for the answer (None: none came)."""
        with self._lock:
            slot = self._slots.get(envelope.key)
            if slot is None:
                return Answer(unavailable=ATTEMPT_OVER)
            slot.inbox.append(envelope)
            slot.waiting.add(envelope.seq)
            slot.changed.notify_all()
            try:
                slot.changed.wait_for(lambda: envelope.seq in slot.answers or slot.closed, wait_s)
            finally:
                slot.waiting.discard(envelope.seq)
            answer = slot.answers.pop(envelope.seq, None)
            return Answer(unavailable=ATTEMPT_OVER) if answer is None and slot.closed else answer

    def take(self, key: str, wait_s: float) -> list[Envelope]:
        """The daemon's side: what the attempt's node posted, waiting up to
        ``wait_s`` for something (nothing once the key is closed)."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                return []
            slot.changed.wait_for(lambda: bool(slot.inbox) or slot.closed, wait_s)
            taken, slot.inbox = slot.inbox, []
            return taken

    def answer(self, key: str, seq: int, answer: Answer) -> None:
        """The daemon's side; kept only for an ask that still waits."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None and seq in slot.waiting:
                slot.answers[seq] = answer
                slot.changed.notify_all()

    def held(self) -> dict[str, tuple[int, int]]:
        """Each open attempt's key, with the messages not yet taken and the
        answers not yet fetched: what a look from outside may check is gone."""
        with self._lock:
            return {key: (len(slot.inbox), len(slot.answers)) for key, slot in self._slots.items()}
