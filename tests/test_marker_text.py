"""A reply's ``[MEMORY]`` markers taken out of the text the owner reads
(``enact.chat.markers.split_markers``): the words around a marker read as if
it had never been there."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from enact.chat.markers import split_markers

_WORDS = st.text(alphabet="abcxyz", min_size=1, max_size=6)
_CLOSERS = st.sampled_from(["", "", ".", ",", "!", "?", ":", ")"])
_GAPS = st.sampled_from([" ", " ", " ", "\n", "\n\n", "\n  "])
_MARKERS = st.lists(st.sampled_from(["[MEMORY]tea[/MEMORY]", "[memory] the owner\n likes tea [/memory]",
                                     "[MEMORY][/MEMORY]"]), min_size=1, max_size=2).map(" ".join)


@st.composite
def replies(draw: st.DrawFn) -> tuple[str, str]:
    """(a reply with markers, the same reply as written without them): words
    with their punctuation, single gaps between them, and markers dropped in
    at a gap, before a punctuation mark or at either end, with or without
    spaces of their own around them."""
    clean: list[str] = []
    marked: list[str] = []

    def maybe_marker(gap: str) -> str:
        """``gap`` as written in the reply, a marker in it or not."""
        if not draw(st.booleans()):
            return gap
        marker = draw(_MARKERS)
        space = draw(st.sampled_from(["", " "]))
        if gap == " ":  # a space on one side at least, or the words would run together
            return draw(st.sampled_from([f" {marker}", f"{marker} ", f" {marker} "]))
        return draw(st.sampled_from([f"{gap}{marker}{space}", f"{space}{marker}{gap}"]))

    marked.append(maybe_marker(""))
    for index in range(draw(st.integers(min_value=1, max_value=8))):
        if index:
            gap = draw(_GAPS)
            clean.append(gap)
            marked.append(maybe_marker(gap))
        word, closer = draw(_WORDS), draw(_CLOSERS)
        clean.append(word + closer)
        marked.append(word + (maybe_marker("") + closer if closer else ""))
    marked.append(maybe_marker(""))
    return "".join(marked), "".join(clean)


@given(replies())
def test_a_reply_without_its_markers_reads_as_if_they_had_never_been_written(case: tuple[str, str]) -> None:
    marked, clean = case
    visible = split_markers(marked).visible
    assert visible == clean.strip()
    assert "  " not in visible.replace("\n  ", "\n")  # no double space (an indented line aside)
    assert not any(f" {mark}" in visible for mark in ".,!?:)")  # no space before punctuation


@pytest.mark.parametrize(("reply", "visible"), [
    ("I will remember [MEMORY]tea[/MEMORY] that.", "I will remember that."),
    ("Noted [MEMORY]tea[/MEMORY].", "Noted."),
    ("(see [MEMORY]tea[/MEMORY] below)", "(see below)"),
    ("([MEMORY]tea[/MEMORY] aside)", "(aside)"),
    ("First.\n[MEMORY]tea[/MEMORY]\n  - an item", "First.\n  - an item"),
    ("A paragraph.\n\n[MEMORY]tea[/MEMORY]\n\nThe next.", "A paragraph.\n\nThe next."),
    ("Kept  as  written [MEMORY]tea[/MEMORY] here.", "Kept  as  written here."),
    ("An unclosed [MEMORY] tag stays.", "An unclosed [MEMORY] tag stays."),
])
def test_a_marker_taken_out_leaves_one_gap_and_no_space_before_punctuation(reply: str, visible: str) -> None:
    assert split_markers(reply).visible == visible
