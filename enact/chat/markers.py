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

from enact.frozen_dataclass import dataclass

MARKER = re.compile(r"\[MEMORY\](.*?)\[/MEMORY\]", re.DOTALL | re.IGNORECASE)
MARKER_TAG = re.compile(r"\[/?MEMORY\]", re.IGNORECASE)

NOT_THE_OWNERS = "the conversation is not the owner's (no chat.allowed_conversations lock includes it)"
FROM_A_RECEIPT = "it repeats the output of an action, which anyone may have written"

_RUN = 6
"""Words in a row shared with a receipt that make a longer marker a repetition:
a marker that quotes part of a receipt, with words of its own around it."""
_WORD = re.compile(r"[^\W_]+")
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(".,;:!?)]}…")
"""Where a marker was taken out, no space is left after an opener or before a closer."""


@dataclass(frozen=True, slots=True)
class Markers:
    visible: str
    """The reply without its markers."""
    texts: tuple[str, ...]
    """Each marker's text, whitespace collapsed; empty ones dropped."""


def split_markers(reply: str) -> Markers:
    texts = (" ".join(m.group(1).split()) for m in MARKER.finditer(reply))
    return Markers(visible=_without_markers(reply).strip(), texts=tuple(text for text in texts if text))


def _without_markers(reply: str) -> str:
    """``reply`` with each run of markers taken out so that the words around
    it read as if it had never been there: the whitespace on either side
    becomes one gap (the wider line break, else one space), and none is left
    before a closing punctuation mark or after an opening bracket. Only the
    whitespace next to a marker changes; the rest is the model's as written."""
    parts: list[str] = []
    kept_to = 0  # the reply up to here is in ``parts``
    for start, end in _marker_runs(reply):
        left = start
        while left > kept_to and reply[left - 1].isspace():
            left -= 1
        right = end
        while right < len(reply) and reply[right].isspace():
            right += 1
        before, after = reply[kept_to:left], reply[right:right + 1]
        parts += [before, _gap(reply[left:start], reply[end:right], after=after,
                               opened=not before or before[-1] in _OPENERS)]
        kept_to = right
    parts.append(reply[kept_to:])
    return "".join(parts)


def _marker_runs(reply: str) -> list[tuple[int, int]]:
    """The spans of markers in a row (only whitespace between them)."""
    runs: list[tuple[int, int]] = []
    for match in MARKER.finditer(reply):
        if runs and not reply[runs[-1][1]:match.start()].strip():
            runs[-1] = (runs[-1][0], match.end())
        else:
            runs.append((match.start(), match.end()))
    return runs


def _gap(left: str, right: str, *, after: str, opened: bool) -> str:
    """What stands where a marker run and the whitespace ``left`` and
    ``right`` of it were, with ``after`` the character that follows."""
    if not after or after in _CLOSERS:
        return ""  # the reply's end (stripped anyway), or "word [marker]." reads "word."
    lines = max(left.count("\n"), right.count("\n"))
    if lines:
        # The wider line break, and the indentation of the line the next
        # word is on (after the break on the right, else before the marker).
        return "\n" * lines + (right if "\n" in right else left).rpartition("\n")[2]
    return "" if opened or not (left or right) else " "


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
