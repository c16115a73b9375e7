"""Telegram's text rules, as plain functions: its longest message, and
whether a text is valid for the HTML parse mode (a long reply is cut into
parts by ``enact.chat.parts``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

MAX_MESSAGE = 4096
"""In UTF-16 code units, as ``enact.chat.parts`` counts."""

# Tags Telegram's HTML parse mode accepts (https://core.telegram.org/bots/api#html-style).
_HTML_TAGS = frozenset({"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
                        "span", "tg-spoiler", "tg-emoji", "blockquote"})


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
