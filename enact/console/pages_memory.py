"""The memory page: facts with their origin and sensitivity (a secret
fact's text is never shown), the facts held for confirmation with confirm
and reject, and forget with or without redacting the turn log."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, redirect, render_template, request

from enact.console.app import ask, fragment_requested
from enact.messages.common import NotFound, Refused
from enact.messages.memory import Confirm, Forget, Reject, forgotten_line
from enact.messages.memory import List as ListFacts

pages = Blueprint("memory", __name__)

SECRET = "secret"


def shown_text(fact: Any) -> str:
    """What the page shows of a fact: a secret one's text never, only its length."""
    if fact.sensitivity == SECRET:
        return f"secret, withheld ({len(fact.text)} characters): `enact memory show {fact.id}` shows it"
    return str(fact.text)


def _values(outcome: str = "", outcome_kind: str = "") -> dict[str, Any]:
    held = ask(ListFacts(pending=True, max_facts=200))
    listed = ask(ListFacts(max_facts=1000))
    return {"held": held.facts, "facts": [f for f in listed.facts if f.state != "pending"], "total": listed.total,
            "shown_text": shown_text, "outcome": outcome, "outcome_kind": outcome_kind}


@pages.get("/memory")
def memory() -> Any:
    return render_template("memory.html", active="/memory", **_values())


def _answered(outcome: str, kind: str) -> Any:
    if not fragment_requested():
        return redirect("/memory", code=303)
    return render_template("memory_body.html", **_values(outcome, kind))


def _said(reply: object, done: str) -> tuple[str, str]:
    if isinstance(reply, Refused):
        return f"Refused: {reply.reason}", "refused"
    if isinstance(reply, NotFound):
        return f"No such fact ({reply.id}): it was confirmed, rejected or forgotten already.", "refused"
    return done, "done"


@pages.post("/memory/<fact_id>/confirm")
def confirm(fact_id: str) -> Any:
    return _answered(*_said(ask(Confirm(id=fact_id[:64])), f"Confirmed {fact_id}: it is active now."))


@pages.post("/memory/<fact_id>/reject")
def reject(fact_id: str) -> Any:
    return _answered(*_said(ask(Reject(id=fact_id[:64])), f"Rejected {fact_id}: it is dropped."))


@pages.post("/memory/<fact_id>/forget")
def forget(fact_id: str) -> Any:
    reply = ask(Forget(selector=fact_id[:64], redact=request.form.get("redact") == "on"))
    if isinstance(reply, Refused | NotFound):
        return _answered(*_said(reply, ""))
    return _answered(forgotten_line(reply).capitalize() + ".", "done")
