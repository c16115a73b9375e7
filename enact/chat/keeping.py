"""Keeping a model's ``[MEMORY]`` markers: each goes to the Memory actor,
held for the owner when it is not the owner's word (``enact.chat.markers``).

Memory is the owner's, so a conversation that is not the owner's learns
nothing of it from what became of a marker: its notice is the same whether
the text made a new held fact or met one memory already had (a notice naming
a fact would let a stranger probe for what the owner's memory holds). And it
may hold only so many facts for the owner's confirmation at once
(``memory.max_pending_per_conversation``), so that a stranger cannot bury the
owner's pending list: the held facts carry a tag naming their conversation,
which counts them and tells the owner where each came from.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

from enact.actors._asks import ActorUnavailable, Asker
from enact.chat.markers import hold_for_owner
from enact.frozen_dataclass import dataclass
from enact.memory.admission import MAX_TAG_CHARS, slug
from enact.memory.commands import memory_notice
from enact.memory.facts import MODEL_MARKER_ORIGIN
from enact.messages.common import Refused
from enact.messages.memory import List, Merged, Pending, Remember, Saved

log = logging.getLogger(__name__)

MEMORY = "memory"
HELD_FOR_THE_OWNER = "held for the owner, whose memory it is"
UNAVAILABLE = "(memory: not saved, the memory is not available right now)"

def held_from_tag(conversation_key: str) -> str:
    """The tag of the facts held from a conversation that is not the owner's."""
    tag = slug(f"from {conversation_key}")
    if len(tag) <= MAX_TAG_CHARS:
        return tag
    return f"from-{hashlib.sha256(conversation_key.encode()).hexdigest()[:16]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerKeeper:
    """Keeps one reply's markers for the conversation ``conversation_key``."""

    ask: Asker
    conversation_key: str
    owners: bool
    max_held: int

    def keep(self, texts: Sequence[str], *, event_id: str, receipts: Sequence[str]) -> str:
        """A notice line per marker: what became of it; a refusal gives its
        reason, never the text."""
        try:
            held = None if self.owners else self._held()
        except ActorUnavailable as error:
            log.warning("event %s: memory markers were not saved: %s", event_id, error)
            return "\n".join(UNAVAILABLE for _ in texts)
        lines = []
        for text in texts:
            if held is not None and held >= self.max_held:
                lines.append(f"(memory: not saved, this conversation already has {held} facts held for the owner, "
                             "the most one that is not the owner's may have (memory.max_pending_per_conversation))")
                continue
            hold = hold_for_owner(text, owners_conversation=self.owners, receipts=receipts)
            tags = () if held is None else (held_from_tag(self.conversation_key),)
            try:
                reply = self.ask(MEMORY, Remember(text=text, origin=MODEL_MARKER_ORIGIN, refs=(event_id,),
                                                  hold=hold, tags=tags))
                if held is not None and not isinstance(reply, Refused):
                    held = self._held()
            except ActorUnavailable as error:
                log.warning("event %s: a memory marker was not saved: %s", event_id, error)
                lines.append(UNAVAILABLE)
                continue
            lines.append(f"(memory: {self._notice(reply)})")
        return "\n".join(lines)

    def _notice(self, reply: Saved | Merged | Pending | Refused) -> str:
        if self.owners or isinstance(reply, Refused):
            return memory_notice(reply)
        return HELD_FOR_THE_OWNER

    def _held(self) -> int:
        """How many facts this conversation has held for the owner now."""
        return self.ask(MEMORY, List(tag=held_from_tag(self.conversation_key), pending=True, max_facts=0)).total
