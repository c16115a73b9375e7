"""What a write to memory decides, before the Memory actor writes it.

A Remember is admitted (``enact.memory.admission``) or refused; admitted, it
is held for the owner or active (``enact.memory.holding``), and new or merged
into the fact with its key. Only a human forgets a fact, confirms or rejects
a held one, or installs or clears the private identity. Each rule reads the
facts and answers at once (refused, unchanged) or with a ``Write`` for the
actor to write through.
"""

from __future__ import annotations

import dataclasses
import logging

from enact.frozen_dataclass import dataclass
from enact.memory.admission import Candidate, Refusal, admit, merged, new_fact
from enact.memory.book import FactBook
from enact.memory.facts import MODEL_MARKER_ORIGIN, Fact, FactState
from enact.memory.holding import MODEL_FACTS_HELD, hold_reason
from enact.messages.common import MODEL_ACTION, NotFound, RefusalCode, Refused, is_human
from enact.messages.memory import NOT_ADMITTED, Change, Confirmed, Merged, Pending, Remember, Saved

log = logging.getLogger("enact.memory.memory_actor")  # the actor's decisions, logged under its name

MODEL_ORIGINS = frozenset({MODEL_MARKER_ORIGIN, MODEL_ACTION})
NEEDS_HUMAN = "refused: {verb} needs a human; a model cannot {verb}"


@dataclass(frozen=True, slots=True)
class Write:
    """A fact to write, its history entry, and the reply once it is durable."""

    fact: Fact
    entry: Change
    reply: Saved | Merged | Pending | Confirmed


def remembered(message: Remember, book: FactBook, *, max_chars: int, hold_model_facts: bool,
               now: float) -> Write | Merged | Refused:
    """What ``message`` makes of the facts in ``book``; ``hold_model_facts``
    is ``memory.confirm_model_facts``."""
    candidate = Candidate(text=message.text, origin=message.origin, type=message.type, scope=message.scope,
                          subject=message.subject, confidence=message.confidence,
                          sensitivity=message.sensitivity, tags=message.tags, refs=message.refs)
    admitted = admit(candidate, max_chars=max_chars)
    if isinstance(admitted, Refusal):
        # The reason names what was wrong, never the text: safe to log.
        log.info("memory refused a fact from %s: %s", message.origin, admitted.reason)
        return Refused(reason=admitted.reason, code=NOT_ADMITTED)
    by_config = MODEL_FACTS_HELD if hold_model_facts and message.origin in MODEL_ORIGINS else ""
    # The reason, never the text: safe to log, and kept in the history.
    why = hold_reason(admitted.text, message.origin, asked=message.hold.strip() or by_config) or ""
    state = FactState.PENDING if why else FactState.ACTIVE
    existing = book.by_key(admitted.key)
    if existing is not None and why and existing.state is FactState.ACTIVE:
        # Only the owner's word changes an active fact: a write to hold
        # (a stranger's marker, a repeated receipt) that meets one is a
        # duplicate, dropped, and the fact keeps its tags, refs and
        # updated time (which ranking reads) as they were.
        log.info("memory left active fact %s as it was: a write from %s to hold met it (%s)",
                 existing.id, message.origin, why)
        return Merged(id=existing.id, unchanged=True)
    if existing is not None:
        fact = merged(existing, admitted, state=state, now=now)
        reply: Saved | Merged | Pending = Pending(id=fact.id, merged=True, why=why) if why else Merged(id=fact.id)
        entry = Change(at=now, change="merged", origin=message.origin, refs=admitted.refs, held=why)
    else:
        fact = new_fact(admitted, fact_id=book.new_id(), state=state, now=now)
        reply = Pending(id=fact.id, why=why) if why else Saved(id=fact.id, clipped=admitted.clipped)
        entry = Change(at=now, change="created", origin=message.origin, refs=admitted.refs, held=why)
    if why:
        log.info("memory holds a fact from %s for the owner: %s", message.origin, why)
    return Write(fact, entry, reply)


def needs_human(origin: str, verb: str) -> Refused | None:
    """A model's word to ``verb`` is refused; None for a human's."""
    return None if is_human(origin) else Refused(reason=NEEDS_HUMAN.format(verb=verb), code=RefusalCode.NOT_HUMAN)


def held(book: FactBook, fact_id: str, origin: str, verb: str) -> Fact | NotFound | Refused:
    """The held fact a human's ``verb`` (confirm, reject) names, or why not."""
    refused = needs_human(origin, verb)
    if refused is not None:
        return refused
    fact = book.get(fact_id.strip())
    if fact is None:
        return NotFound(kind="fact", id=fact_id.strip())
    if fact.state is not FactState.PENDING:
        return Refused(reason=f"refused: {fact.id} is not held for confirmation", code=RefusalCode.WRONG_STATE)
    return fact


def confirmed(fact: Fact, origin: str, now: float) -> Write:
    """The owner's confirm makes a held fact active."""
    return Write(dataclasses.replace(fact, state=FactState.ACTIVE, updated_at=now),
                 Change(at=now, change="confirmed", origin=origin), Confirmed(id=fact.id))
