"""Forgetting with ``--redact``: once the forgetting is durable, the Inbox
(which owns the turn log) replaces the fact's text there with a tombstone.

The Inbox rewrites its whole log for it, which takes a while on a long log;
the Memory actor must not wait on that, so the ask runs on a thread of its
own and the forget's reply (a ``Deferred``) follows it. The forgetting is
durable whatever the Inbox answers: a redaction that failed is said in the
reply, never turned into a failed forget.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from enact.actors._batching import Deferred
from enact.memory.admission import TRUNCATION_MARK
from enact.memory.facts import Fact
from enact.messages.inbox import RedactTurns, TurnsRedacted
from enact.messages.memory import Forgotten

log = logging.getLogger(__name__)

AskInbox = Callable[[RedactTurns], TurnsRedacted]


def tombstone(fact_id: str) -> str:
    return f"[forgotten memory {fact_id}]"


def redacted(ask: AskInbox, fact: Fact) -> Forgotten:
    """Ask the Inbox to redact ``fact``'s text; the reply says how it went."""
    text = fact.text.removesuffix(TRUNCATION_MARK)
    try:
        done = ask(RedactTurns(texts=(text,), tombstone=tombstone(fact.id)))
    except Exception as error:  # unavailable, timed out or failed: the fact is forgotten all the same
        log.warning("forgot %s but could not redact the turn log: %s: %s", fact.id, type(error).__name__, error)
        return Forgotten(id=fact.id, redacted=False, redact_error=f"the turn log was not redacted: {error}")
    return Forgotten(id=fact.id, redacted=True, turns_redacted=done.turns)


def redact_then_reply(ask: AskInbox, fact: Fact, reply: Deferred) -> threading.Thread:
    """Start the redaction on its own thread; ``reply`` is resolved once it is done."""

    def run() -> None:
        reply.resolve(redacted(ask, fact))

    thread = threading.Thread(target=run, name=f"enact-memory-redact-{fact.id}", daemon=True)
    thread.start()
    return thread
