"""Finishing a forgetting (``enact.memory.forgetting``): the Sessions actor
and, with ``--redact``, the Inbox are asked (off the Memory actor's thread,
``off_thread``, so it is not held up); the reply follows them and says how
it went; a pending intent is found again by its fact's id or text."""

from __future__ import annotations

from typing import Any

from enact.actors._asks import ActorNotFound
from enact.memory.admission import Admitted, Candidate, admit, new_fact
from enact.memory.facts import Fact, FactState
from enact.memory.forgetting import ForgetIntent, finished, intent_of, matching, patient, tombstone
from enact.messages._registry import Request
from enact.messages.inbox import RedactTurns, TurnsRedacted
from enact.messages.memory import Forgotten, forgotten_line
from enact.messages.sessions import FactForgotten, ForgetFact


def _fact(text: str, fact_id: str = "f-0000abcd") -> Fact:
    admitted = admit(Candidate(text=text, origin="human-cli"), max_chars=500)
    assert isinstance(admitted, Admitted)
    return new_fact(admitted, fact_id=fact_id, state=FactState.ACTIVE, now=1.0)


def _intent(text: str = "the gate code is blue seven", *, redact: bool = True) -> ForgetIntent:
    return intent_of(_fact(text), redact=redact, now=2.0)


def test_the_reply_follows_the_sessions_and_the_inbox_and_says_how_it_went() -> None:
    asked: list[tuple[str, object]] = []

    def actors(actor: str, request: Request[Any]) -> object:
        asked.append((actor, request))
        if actor == "sessions":
            return FactForgotten(histories=2, sessions=1)
        return TurnsRedacted(turns=3, receipts=1)

    forgotten = finished(actors, _intent())
    assert forgotten == Forgotten(id="f-0000abcd", redacted=True, turns_redacted=3, histories_redacted=2,
                                  sessions_reset=1)
    texts, stone = ("the gate code is blue seven",), tombstone("f-0000abcd")
    assert asked == [("sessions", ForgetFact(texts=texts, tombstone=stone, since=1.0)),
                     ("inbox", RedactTurns(texts=texts, tombstone=stone))]
    assert forgotten_line(forgotten) == "forgot 1 fact (f-0000abcd); redacted 3 turns, 2 histories; reset 1 sessions"


def test_without_redact_the_turn_log_is_left_and_the_reply_says_so() -> None:
    asked: list[str] = []

    def actors(actor: str, request: Request[Any]) -> object:
        asked.append(actor)
        return FactForgotten(histories=0, sessions=2)

    forgotten = finished(actors, _intent(redact=False))
    assert asked == ["sessions"] and forgotten.redacted is False and not forgotten.redact_error
    assert forgotten_line(forgotten) == (
        "forgot 1 fact (f-0000abcd); redacted 0 histories, not the turn log (use --redact); reset 2 sessions")


def test_a_failed_redaction_is_said_in_the_reply_not_raised() -> None:
    def actors(actor: str, request: Request[Any]) -> object:
        if actor == "inbox":
            raise RuntimeError("logs.turns: an unreadable record")
        return FactForgotten(histories=0, sessions=0)

    forgotten = finished(actors, _intent())
    assert isinstance(forgotten, Forgotten) and forgotten.redacted is False
    assert forgotten.redact_error == "the turn log was not redacted: logs.turns: an unreadable record"
    assert "not the turn log (use --redact)" not in forgotten_line(forgotten)


def test_a_pending_intent_is_named_by_its_id_or_its_text_as_the_fact_was() -> None:
    boat = intent_of(_fact("The owner's boat is named Aurora.", "f-1"), redact=False, now=5.0)
    bike = intent_of(_fact("the owner's bike is a gravel bike", "f-2"), redact=False, now=6.0)
    assert matching([boat, bike], " f-2 ") == bike
    assert matching([boat, bike], "the owner's BOAT is named aurora") == boat
    assert matching([boat, bike], "gravel bike") == bike
    assert matching([boat, bike], "the owner's") == boat  # the oldest
    assert matching([boat, bike], "a kayak") is None and matching([boat, bike], "  ") is None


def test_an_actor_not_started_yet_is_waited_for_and_a_stop_ends_the_wait() -> None:
    calls: list[int] = []

    def late(actor: str, request: Request[Any]) -> object:
        calls.append(1)
        if len(calls) < 3:
            raise ActorNotFound(actor)
        return FactForgotten(histories=0, sessions=0)

    request = ForgetFact(texts=("x",), tombstone="[x]", since=0.0)
    assert patient(late, stopping=lambda: False)("sessions", request) == FactForgotten(histories=0, sessions=0)
    calls.clear()
    try:
        patient(late, stopping=lambda: True)("sessions", request)
    except ActorNotFound:
        assert calls == [1]
    else:
        raise AssertionError("a stopping daemon must not be waited on")
