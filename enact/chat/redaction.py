"""Redaction of a forgotten fact's text: replaced by a tombstone in what the
inbox keeps (the turn log and the receipts behind it) and in the message
histories the Sessions actor keeps for a stateless runtime.

Idempotent: a tombstone already written is never rewritten, so a redaction
that is finished again (after a crash, or by a second forget) changes nothing
it changed before, even when the forgotten text occurs in a tombstone."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from enact.chat.records import Receipt
from enact.messages.inbox import ActionRecord, Turn

_TRAILING = ".!?;:,… "
_TOMBSTONE = re.compile(r"\[forgotten memory [^\]\s]*\]")
"""Any tombstone (``enact.memory.redaction.tombstone``), left as it is."""


def pattern_of(texts: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern matching any of ``texts`` whatever its case, its runs of
    whitespace and its trailing punctuation; None when there is nothing to match."""
    alternatives = []
    for text in texts:
        words = text.strip().rstrip(_TRAILING).split()
        if words:
            alternatives.append(r"\s+".join(re.escape(word) for word in words))
    if not alternatives:
        return None
    # Longest first, so a text that contains another is replaced whole.
    alternatives.sort(key=len, reverse=True)
    # Whole words only: forgetting "Bob" must not rewrite "bobsled".
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


def redact_text(text: str, pattern: re.Pattern[str], tombstone: str) -> str:
    """``text`` with every match outside the tombstones already in it replaced."""
    parts: list[str] = []
    at = 0
    for kept in _TOMBSTONE.finditer(text):
        parts.append(pattern.sub(tombstone, text[at:kept.start()]))
        parts.append(kept.group(0))
        at = kept.end()
    parts.append(pattern.sub(tombstone, text[at:]))
    return "".join(parts)


def _scrub(value: Any, pattern: re.Pattern[str], tombstone: str) -> Any:
    if isinstance(value, str):
        return redact_text(value, pattern, tombstone)
    if isinstance(value, dict):
        return {key: _scrub(item, pattern, tombstone) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(item, pattern, tombstone) for item in value)
    return value


def _actions(actions: tuple[ActionRecord, ...], pattern: re.Pattern[str], tombstone: str) -> tuple[ActionRecord, ...]:
    return tuple(
        dataclasses.replace(action, args=_scrub(action.args, pattern, tombstone),
                            receipt=redact_text(action.receipt, pattern, tombstone))
        for action in actions
    )


def redacted_turn(turn: Turn, pattern: re.Pattern[str], tombstone: str) -> Turn | None:
    """The turn with every match replaced, or None when nothing matched."""
    changed = dataclasses.replace(
        turn,
        message=redact_text(turn.message, pattern, tombstone),
        reply=redact_text(turn.reply, pattern, tombstone),
        error=redact_text(turn.error, pattern, tombstone),
        actions=_actions(turn.actions, pattern, tombstone),
    )
    return None if changed == turn else changed


def redacted_receipt(receipt: Receipt, pattern: re.Pattern[str], tombstone: str) -> Receipt | None:
    event = receipt.event
    changed = dataclasses.replace(
        receipt,
        event=dataclasses.replace(event, text=redact_text(event.text, pattern, tombstone),
                                  reply_to=redact_text(event.reply_to, pattern, tombstone)),
        reply=redact_text(receipt.reply, pattern, tombstone),
        actions=_actions(receipt.actions, pattern, tombstone),
    )
    return None if changed == receipt else changed
