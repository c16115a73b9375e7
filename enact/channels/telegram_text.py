"""Telegram's text rules, as plain functions: splitting a long reply into
numbered parts, and whether a text is valid for the HTML parse mode.

Telegram measures a message in UTF-16 code units (4,096 at most), so an
emoji outside the Basic Multilingual Plane counts twice.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

MAX_MESSAGE = 4096

# Tags Telegram's HTML parse mode accepts (https://core.telegram.org/bots/api#html-style).
_HTML_TAGS = frozenset({"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
                        "span", "tg-spoiler", "tg-emoji", "blockquote"})


def units(text: str) -> int:
    """The length Telegram counts: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def split_reply(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """The reply as it is sent: whole if it fits, else parts labelled
    ``(n/N)`` of at most ``limit`` units each, cut at a paragraph break where
    one is near, else at a line break, else at a space, else anywhere."""
    if units(text) <= limit:
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


_BARE_AMPERSAND = re.compile(r"&(?!(?:lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);)")
_BARE_LESS_THAN = re.compile(r"<(?![a-zA-Z/])")


class _HtmlCheck(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.valid = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TAGS:
            self.valid = False
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.valid = False

    def handle_entityref(self, name: str) -> None:
        if name not in ("lt", "gt", "amp", "quot"):
            self.valid = False

    def handle_decl(self, decl: str) -> None:
        self.valid = False

    def handle_pi(self, data: str) -> None:
        self.valid = False

    def unknown_decl(self, data: str) -> None:
        self.valid = False


def valid_html(text: str) -> bool:
    """Whether Telegram's HTML parse mode would take ``text`` as written:
    only its tags, balanced, and no bare ``<`` or ``&``."""
    if _BARE_AMPERSAND.search(text) or _BARE_LESS_THAN.search(text):
        return False
    checker = _HtmlCheck()
    try:
        checker.feed(text)
        checker.close()
    except Exception:  # html.parser may raise on malformed input: invalid, whatever it was
        return False
    return checker.valid and not checker.open
