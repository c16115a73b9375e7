"""``[MEMORY]…[/MEMORY]`` markers in a model's final reply, and whether
memory may take one as the owner's word.

A marker is the model asking memory to keep a text; what the model writes is
anyone's it read. It is the owner's only when the conversation is the
owner's (the local CLI, or a chat inside a configured lock) and the text is
not one the model read in an action's receipt (a command's output, a page it
fetched): otherwise it is held for the owner (``Remember.hold``), never
active.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MARKER = re.compile(r"\[MEMORY\](.*?)\[/MEMORY\]", re.DOTALL | re.IGNORECASE)
MARKER_TAG = re.compile(r"\[/?MEMORY\]", re.IGNORECASE)

NOT_THE_OWNERS = "the conversation is not the owner's (no chat.allowed_conversations lock includes it)"
FROM_A_RECEIPT = "it repeats the output of an action, which anyone may have written"

_RUN = 6
"""Words in a row shared with a receipt that make a longer marker a repetition:
a marker that quotes part of a receipt, with words of its own around it."""
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Markers:
    visible: str
    """The reply without its markers."""
    texts: tuple[str, ...]
    """Each marker's text, whitespace collapsed; empty ones dropped."""


def split_markers(reply: str) -> Markers:
    texts = (" ".join(m.group(1).split()) for m in MARKER.finditer(reply))
    return Markers(visible=MARKER.sub("", reply).strip(), texts=tuple(text for text in texts if text))


def hold_for_owner(text: str, *, owners_conversation: bool, receipts: Sequence[str]) -> str:
    """Why the marker's ``text`` waits for the owner ("" when it is the owner's word)."""
    if not owners_conversation:
        return NOT_THE_OWNERS
    if repeats_receipt(text, receipts):
        return FROM_A_RECEIPT
    return ""


def repeats_receipt(text: str, receipts: Iterable[str]) -> bool:
    """``text`` comes from one of ``receipts``: a receipt that carries a marker
    of its own (output written to plant one), or one holding the text's words
    in order (case and punctuation aside), all of them or a run of six. A
    paraphrase is not caught: the rule catches a model repeating what it read."""
    words = _words(text)
    if not words:
        return False
    runs = {" ".join(words[i:i + _RUN]) for i in range(len(words) - _RUN + 1)} if len(words) > _RUN else set()
    whole = f" {' '.join(words)} "
    for receipt in receipts:
        if MARKER_TAG.search(receipt):
            return True
        spoken = f" {' '.join(_words(receipt))} "
        if whole in spoken or any(f" {run} " in spoken for run in runs):
            return True
    return False


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())
