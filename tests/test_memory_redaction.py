"""forget --redact: the Inbox's rewrite of the turn log runs on its own
thread, so the Memory actor is not held up by it; the forget's reply follows
the rewrite and says how it went."""

from __future__ import annotations

import threading

from enact.actors._batching import Deferred
from enact.memory.admission import Admitted, Candidate, admit, new_fact
from enact.memory.facts import Fact, FactState
from enact.memory.redaction import redact_then_reply, tombstone
from enact.messages.inbox import RedactTurns, TurnsRedacted
from enact.messages.memory import Forgotten


def _fact(text: str) -> Fact:
    admitted = admit(Candidate(text=text, origin="human-cli"), max_chars=500)
    assert isinstance(admitted, Admitted)
    return new_fact(admitted, fact_id="f-0000abcd", state=FactState.ACTIVE, now=1.0)


def test_the_reply_waits_for_a_slow_redaction_and_the_caller_does_not() -> None:
    release = threading.Event()
    asked: list[RedactTurns] = []

    def slow_inbox(request: RedactTurns) -> TurnsRedacted:
        asked.append(request)
        assert release.wait(10)
        return TurnsRedacted(turns=3, receipts=1)

    reply = Deferred()
    thread = redact_then_reply(slow_inbox, _fact("the gate code is blue seven"), reply)
    # The caller (the Memory actor's thread) is back at once; the reply is owed.
    assert thread.is_alive() and not reply.done
    release.set()
    assert reply.wait(10) == Forgotten(id="f-0000abcd", redacted=True, turns_redacted=3)
    assert asked == [RedactTurns(texts=("the gate code is blue seven",), tombstone=tombstone("f-0000abcd"))]


def test_a_failed_redaction_is_said_in_the_reply_not_raised() -> None:
    def failing_inbox(request: RedactTurns) -> TurnsRedacted:
        raise RuntimeError("logs.turns: an unreadable record")

    reply = Deferred()
    redact_then_reply(failing_inbox, _fact("the gate code is blue seven"), reply).join(10)
    forgotten = reply.wait(0)
    assert isinstance(forgotten, Forgotten) and forgotten.redacted is False
    assert forgotten.redact_error == "the turn log was not redacted: logs.turns: an unreadable record"
