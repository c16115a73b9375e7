"""Telegram's text rules without a daemon: splitting and the HTML check."""

from __future__ import annotations

import pytest

from enact.channels.telegram_text import MAX_MESSAGE, valid_html
from enact.chat.parts import split_reply, units


def test_a_reply_that_fits_is_sent_whole() -> None:
    assert split_reply("short", MAX_MESSAGE) == ["short"]
    assert split_reply("x" * MAX_MESSAGE, MAX_MESSAGE) == ["x" * MAX_MESSAGE]


def test_a_long_reply_is_cut_on_paragraph_breaks_into_numbered_parts() -> None:
    paragraphs = [f"{n}. " + "word " * 300 + "end." for n in range(6)]
    parts = split_reply("\n\n".join(paragraphs), MAX_MESSAGE)
    assert all(units(part) <= MAX_MESSAGE for part in parts)
    assert [part.split("\n", 1)[0] for part in parts] == [f"({n}/{len(parts)})" for n in range(1, len(parts) + 1)]
    bodies = [part.split("\n", 1)[1] for part in parts]
    assert "\n\n".join(bodies) == "\n\n".join(paragraphs)


def test_without_breaks_a_reply_is_cut_on_lines_then_words_then_anywhere() -> None:
    lines = "\n".join("line " * 20 for _ in range(100))
    assert all(part.split("\n", 1)[1].endswith("line") for part in split_reply(lines, MAX_MESSAGE)[:-1])
    solid = "y" * 10_000
    parts = split_reply(solid, MAX_MESSAGE)
    assert "".join(p.split("\n", 1)[1] for p in parts) == solid


def test_no_limit_sends_any_reply_whole() -> None:
    assert split_reply("z" * 100_000, 0) == ["z" * 100_000]


def test_length_counts_utf16_units_as_telegram_does() -> None:
    parts = split_reply("😀" * 3000, MAX_MESSAGE)  # two units each
    assert len(parts) == 2 and all(units(p) <= MAX_MESSAGE for p in parts)
    assert "".join(p.split("\n", 1)[1] for p in parts) == "😀" * 3000


@pytest.mark.parametrize("text", ["plain words", "<b>bold</b> &amp; <i>x</i>", '<a href="https://e.x">l</a>',
                                  "<pre><code>x &lt; y</code></pre>", "5 &gt; 3"])
def test_valid_html_is_taken_as_html(text: str) -> None:
    assert valid_html(text)


@pytest.mark.parametrize("text", ["a < b", "fish & chips", "<b>open", "<b><i>x</b></i>", "<script>x</script>",
                                  "&nbsp;", "</b>"])
def test_anything_else_is_not_valid_html(text: str) -> None:
    assert not valid_html(text)
