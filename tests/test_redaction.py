"""Redaction of logged turns: the forgotten text, whatever its case, spacing
or trailing punctuation, becomes the tombstone; the rest stays."""

from __future__ import annotations

from enact.chat.redaction import pattern_of, redact_text, redacted_turn
from enact.messages.inbox import ActionRecord, Turn


def _turn(message: str, reply: str = "ok", actions: tuple[ActionRecord, ...] = ()) -> Turn:
    return Turn(event_id="e", channel="local", conversation="cli", message_id="m", message=message,
                      reply=reply, time=1.0, outcome="replied", attempts=1, actions=actions)


def test_text_is_replaced_ignoring_case_spacing_and_trailing_punctuation() -> None:
    pattern = pattern_of(["The gate code is blue seven."])
    assert pattern is not None
    logged = _turn("note THE gate  code is\nblue seven! thanks", reply="Noted: the gate code is blue seven")
    turn = redacted_turn(logged, pattern, "[gone]")
    assert turn is not None
    assert turn.message == "note [gone]! thanks" and turn.reply == "Noted: [gone]"


def test_action_args_and_receipts_are_redacted_too() -> None:
    pattern = pattern_of(["blue seven"])
    assert pattern is not None
    action = ActionRecord(command="remember", args={"text": "code blue seven", "n": 1}, receipt="kept blue seven",
                          ok=True)
    turn = redacted_turn(_turn("hi", actions=(action,)), pattern, "[gone]")
    assert turn is not None
    assert turn.actions[0].args == {"text": "code [gone]", "n": 1} and turn.actions[0].receipt == "kept [gone]"


def test_a_turn_without_the_text_is_left_alone() -> None:
    pattern = pattern_of(["blue seven"])
    assert pattern is not None and redacted_turn(_turn("blue eight"), pattern, "[gone]") is None
    assert pattern_of(["  ", "..."]) is None


def test_only_whole_words_are_redacted() -> None:
    pattern = pattern_of(["Bob"])
    assert pattern is not None
    assert pattern.sub("[x]", "Bob went bobsledding with bob.") == "[x] went bobsledding with [x]."


def test_redacting_again_changes_nothing_even_when_the_text_is_in_the_tombstone() -> None:
    pattern = pattern_of(["memory"])
    assert pattern is not None
    once = redacted_turn(_turn("my memory is bad", reply="memory, memory"), pattern, "[forgotten memory f-1]")
    assert once is not None and once.message == "my [forgotten memory f-1] is bad"
    assert redacted_turn(once, pattern, "[forgotten memory f-1]") is None
    assert redact_text("[forgotten memory f-9] and memory", pattern, "[forgotten memory f-1]") == (
        "[forgotten memory f-9] and [forgotten memory f-1]")
