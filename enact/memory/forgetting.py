"""Forgetting a fact reaches every copy enact keeps and sends to a model.

The fact's deletion and a ``ForgetIntent`` are committed in one transaction
(``memory.forgetting``, owned by the Memory actor), so a crash cannot leave
the fact gone and its copies kept with nothing left to name them. Once that
is durable the intent is finished off the Memory actor's thread
(``off_thread``: the Inbox rewrites its whole log, which takes a while; the
Memory actor must not wait on it), and the reply given and the intent
deleted back on it:

- the Sessions actor redacts the text in the kept message histories (the
  ``openai`` runtime's) and resets the native sessions that may have been
  given it (``sessions.ForgetFact``);
- with ``--redact``, the Inbox replaces it in the turn log (``inbox.RedactTurns``).

The intent is deleted once both answered. One that did not finish (a crash,
an actor that failed) is finished again when the Memory actor starts, and by
forgetting the fact again (by its id or its text). Every step is idempotent.
The forgetting itself is durable whatever the others answer: what failed is
said in the reply, never turned into a failed forget.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import lmdb

from enact.actors._asks import ActorNotFound, Asker
from enact.actors._batching import Deferred, WriteBatch
from enact.actors._long_work import OffThread
from enact.frozen_dataclass import dataclass
from enact.memory.admission import TRUNCATION_MARK, merge_key
from enact.memory.facts import Fact
from enact.messages._registry import Request
from enact.messages.inbox import RedactTurns
from enact.messages.memory import Forgotten
from enact.messages.sessions import ForgetFact
from enact.storage import RecordTable, Store

log = logging.getLogger(__name__)

FORGETTING = "memory.forgetting"
"""Fact id → ``ForgetIntent``: forgettings whose copies are not all reached yet."""

R = TypeVar("R")

ACTORS_WAIT_S = 60.0
"""At start the Memory actor is up before the Inbox and the Sessions actor
are (the Inbox depends on it): an intent resumed then waits this long for them."""
_POLL_S = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgetIntent:
    fact_id: str
    text: str
    since: float
    """When the fact was created: a native session used since may hold it."""
    redact_turns: bool
    """``--redact``: the turn log too."""
    at: float


def intent_of(fact: Fact, *, redact: bool, now: float) -> ForgetIntent:
    return ForgetIntent(fact_id=fact.id, text=fact.text, since=fact.created_at, redact_turns=redact, at=now)


def matching(intents: Iterable[ForgetIntent], selector: str) -> ForgetIntent | None:
    """The pending intent ``selector`` names as a forget would name its fact:
    its id exactly, else the oldest whose text equals or contains it."""
    by_id = {intent.fact_id: intent for intent in intents}
    exact = by_id.get(selector.strip())
    if exact is not None:
        return exact
    wanted = merge_key(selector)
    found = sorted((intent for intent in by_id.values() if wanted and wanted in merge_key(intent.text)),
                   key=lambda intent: (intent.at, intent.fact_id))
    return found[0] if found else None


def tombstone(fact_id: str) -> str:
    return f"[forgotten memory {fact_id}]"


def finished(ask: Asker, intent: ForgetIntent) -> Forgotten:
    """Reach every copy; the reply says how many, and what could not be reached."""
    texts = (intent.text.removesuffix(TRUNCATION_MARK),)
    stone = tombstone(intent.fact_id)
    errors: list[str] = []
    histories = sessions = turns = 0
    try:
        forgot = ask("sessions", ForgetFact(texts=texts, tombstone=stone, since=intent.since))
        histories, sessions = forgot.histories, forgot.sessions
    except Exception as error:  # unavailable, timed out or failed: retried at the next start
        errors.append(f"the sessions were not reached: {error}")
    redacted = False
    if intent.redact_turns:
        try:
            done = ask("inbox", RedactTurns(texts=texts, tombstone=stone))
            turns, redacted = done.turns, True
        except Exception as error:
            errors.append(f"the turn log was not redacted: {error}")
    for problem in errors:
        log.warning("forgot %s but %s", intent.fact_id, problem)
    return Forgotten(id=intent.fact_id, redacted=redacted, turns_redacted=turns, histories_redacted=histories,
                     sessions_reset=sessions, redact_error="; ".join(errors))


def patient(ask: Asker, *, stopping: Callable[[], bool], wait_s: float = ACTORS_WAIT_S) -> Asker:
    """``ask``, waiting up to ``wait_s`` for an actor that is not started yet."""

    def asking(actor: str, message: Request[R]) -> R:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return ask(actor, message)
            except ActorNotFound:
                if stopping() or time.monotonic() > deadline:
                    raise
                time.sleep(_POLL_S)

    return asking


class Forgettings:
    """The Memory actor's pending intents, in LMDB and in memory. Used on
    the actor's thread only; only the asks that reach the copies run off it."""

    def __init__(self, store: Store, batch: WriteBatch, ask: Asker, off_thread: OffThread) -> None:
        self._table = RecordTable(store.table(FORGETTING), ForgetIntent)
        self._store = store
        self._batch = batch
        self._ask = ask
        self._off_thread = off_thread
        self._pending: dict[str, ForgetIntent] = {}  # as committed, or staged

    def resume(self) -> None:
        """At start: finish every forgetting a crash cut short."""
        self._pending = self._store.read(lambda txn: {intent.fact_id: intent for _, intent in self._table.items(txn)})
        for intent in self._pending.values():
            log.info("memory: finishing the forgetting of %s, cut short before", intent.fact_id)
            self._finish(intent)

    def put(self, txn: lmdb.Transaction, intent: ForgetIntent) -> None:
        """In the transaction that deletes the fact."""
        self._table.put(txn, intent.fact_id.encode(), intent)

    def start(self, intent: ForgetIntent, reply: Deferred) -> None:
        """``intent`` is committed: reach the copies, then ``reply``."""
        self._pending[intent.fact_id] = intent
        self._finish(intent, reply)

    def again(self, selector: str, *, redact: bool) -> Deferred | None:
        """A forget that names no fact but a forgetting not finished: finish
        it (asked with ``--redact`` now, the turn log too, recorded first).
        None when ``selector`` names no pending intent either."""
        intent = matching(self._pending.values(), selector)
        if intent is None:
            return None
        reply = Deferred()
        if not redact or intent.redact_turns:
            self._finish(intent, reply)
            return reply
        wider = dataclasses.replace(intent, redact_turns=True)
        self._pending[intent.fact_id] = wider
        self._batch.stage(lambda txn: self.put(txn, wider), lambda _: self._finish(wider, reply), failed=reply.fail)
        return reply

    def finished(self, intent: ForgetIntent) -> None:
        """Every copy reached: the intent goes (unless widened meanwhile,
        when the wider one is finishing)."""
        if self._pending.get(intent.fact_id) != intent:
            return
        del self._pending[intent.fact_id]
        self._batch.stage(lambda txn: self._table.delete(txn, intent.fact_id.encode()))

    def _finish(self, intent: ForgetIntent, reply: Deferred | None = None) -> None:
        def then(forgotten: Forgotten) -> None:
            if not forgotten.redact_error:
                self.finished(intent)
            if reply is not None:
                reply.resolve(forgotten)

        self._off_thread(lambda _: finished(self._ask, intent), then=then)
