"""Redaction of logged turns: a forgotten fact's text replaced by a tombstone
in what the inbox keeps (the turn log and the receipts behind it)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from enact.chat.records import LoggedTurn, Receipt
from enact.messages.inbox import ActionRecord

_TRAILING = ".!?;:,… "


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


def _scrub(value: Any, pattern: re.Pattern[str], tombstone: str) -> Any:
    if isinstance(value, str):
        return pattern.sub(tombstone, value)
    if isinstance(value, dict):
        return {key: _scrub(item, pattern, tombstone) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(item, pattern, tombstone) for item in value)
    return value


def _actions(actions: tuple[ActionRecord, ...], pattern: re.Pattern[str], tombstone: str) -> tuple[ActionRecord, ...]:
    return tuple(
        dataclasses.replace(action, args=_scrub(action.args, pattern, tombstone),
                            receipt=pattern.sub(tombstone, action.receipt))
        for action in actions
    )


def redacted_turn(turn: LoggedTurn, pattern: re.Pattern[str], tombstone: str) -> LoggedTurn | None:
    """The turn with every match replaced, or None when nothing matched."""
    changed = dataclasses.replace(
        turn,
        message=pattern.sub(tombstone, turn.message),
        reply=pattern.sub(tombstone, turn.reply),
        error=pattern.sub(tombstone, turn.error),
        actions=_actions(turn.actions, pattern, tombstone),
    )
    return None if changed == turn else changed


def redacted_receipt(receipt: Receipt, pattern: re.Pattern[str], tombstone: str) -> Receipt | None:
    event = receipt.event
    changed = dataclasses.replace(
        receipt,
        event=dataclasses.replace(event, text=pattern.sub(tombstone, event.text),
                                  reply_to=pattern.sub(tombstone, event.reply_to)),
        reply=pattern.sub(tombstone, receipt.reply),
        actions=_actions(receipt.actions, pattern, tombstone),
    )
    return None if changed == receipt else changed
