"""A reply too long for its channel, as numbered parts: plain functions.

A channel declares its longest message (``Channel.max_message_length``);
the outbox sends a longer reply as parts cut here, and journals each part
(``enact.chat.deliveries``). Length is counted in UTF-16 code units, as
Telegram counts it (an emoji outside the Basic Multilingual Plane counts
twice): never less than the characters a channel counts, so a part fits
whichever way a channel measures.
"""

from __future__ import annotations


def units(text: str) -> int:
    """A text's length as counted here: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def split_reply(text: str, limit: int) -> list[str]:
    """The reply as it is sent: whole if it fits (or ``limit`` is 0: no
    limit), else parts labelled ``(n/N)`` of at most ``limit`` units each, cut
    at a paragraph break where one is near, else at a line break, else at a
    space, else anywhere."""
    if not limit or units(text) <= limit:
        return [text]
    # The label's width depends on the count of parts; settle it by trying.
    count = 2
    while True:
        label_room = units(f"({count}/{count})\n")
        pieces = _cut(text, limit - label_room)
        if len(pieces) <= count:
            return [f"({n}/{len(pieces)})\n{piece}" for n, piece in enumerate(pieces, 1)]
        count = len(pieces)


def _cut(text: str, room: int) -> list[str]:
    pieces = []
    rest = text
    while units(rest) > room:
        head = _prefix_within(rest, room)
        cut = _best_break(head)
        piece, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n")
        if piece:
            pieces.append(piece)
    if rest.strip():
        pieces.append(rest)
    return pieces


def _prefix_within(text: str, room: int) -> str:
    """The longest prefix of ``text`` that fits ``room`` units (and does not
    end inside a surrogate pair)."""
    if len(text) <= room // 2:
        return text
    low, high = 0, min(len(text), room)
    while low < high:
        middle = (low + high + 1) // 2
        if units(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _best_break(head: str) -> int:
    """Where to end a part: the last paragraph, line or word break in its
    second half, so that no part is needlessly short; else the whole head."""
    floor = len(head) // 2
    for mark in ("\n\n", "\n", " "):
        at = head.rfind(mark)
        if at > floor:
            return at + len(mark)
    return len(head)
