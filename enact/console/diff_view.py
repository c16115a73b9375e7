"""A review's unified diff as highlighted HTML (Pygments' diff lexer, CSS
classes styled by ``static/highlight.css``, which ``python -m
enact.console.diff_view`` writes)."""

from __future__ import annotations

import sys
from typing import Any

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

_CSS_CLASS = "highlight"


def highlighted_diff(text: str) -> Markup:
    if not text.strip():
        return Markup('<p class="empty">No change.</p>')
    formatter = HtmlFormatter(cssclass=_CSS_CLASS, wrapcode=True)
    # Pygments escapes the text it highlights: what it returns is HTML to keep as it is.
    return Markup(highlight(text, DiffLexer(), formatter))


def stylesheet() -> str:
    style_defs: Any = HtmlFormatter(style="default").get_style_defs  # untyped in its stubs
    return str(style_defs(f".{_CSS_CLASS}"))


if __name__ == "__main__":
    sys.stdout.write(stylesheet() + "\n")
