"""The evolution page: the mode, evidence signals, candidates and
proposals; approve and remove a candidate, set the mode."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, redirect, render_template, request

from enact.console.app import ask, fragment_requested
from enact.evolution.modes import EvolveMode
from enact.messages.common import NotFound, Refused
from enact.messages.curator import Approve, Candidates, GetMode, History, Remove, SetMode
from enact.messages.scanner import Signals

pages = Blueprint("evolution", __name__)


def _values(outcome: str = "", outcome_kind: str = "") -> dict[str, Any]:
    candidates = ask(Candidates(limit=100))
    signals = ask(Signals(limit=50))
    history = ask(History(limit=20))
    notes = [reply.reason for reply in (candidates, signals, history) if isinstance(reply, Refused)]
    return {
        "mode": ask(GetMode()),
        "modes": [mode.value for mode in EvolveMode],
        "candidates": () if isinstance(candidates, Refused) else candidates.candidates,
        "signals": () if isinstance(signals, Refused) else signals.signals,
        "proposals": () if isinstance(history, Refused) else history.proposals,
        "notes": notes, "outcome": outcome, "outcome_kind": outcome_kind,
    }


@pages.get("/evolution")
def evolution() -> Any:
    return render_template("evolution.html", active="/evolution", **_values())


def _answered(reply: object, done: str) -> Any:
    if not fragment_requested():
        return redirect("/evolution", code=303)
    if isinstance(reply, Refused):
        outcome, kind = f"Refused: {reply.reason}", "refused"
    elif isinstance(reply, NotFound):
        outcome, kind = reply.line.capitalize() + ".", "refused"
    else:
        outcome, kind = done, "done"
    return render_template("evolution_body.html", **_values(outcome, kind))


@pages.post("/evolution/candidates/<candidate_id>/approve")
def approve(candidate_id: str) -> Any:
    # As `enact evolve approve --repo`: empty is enact's own checkout, else
    # tasks.default_repo; the curator and the queue check what is given.
    reply = ask(Approve(candidate_id=candidate_id[:64], repo=request.form.get("repo", "").strip()[:4096]))
    if isinstance(reply, Refused | NotFound):
        return _answered(reply, "")
    if reply.task_id is None:
        done = f"Approved {candidate_id}" + (f": installed {reply.installed}." if reply.installed else ".")
    else:
        done = f"Approved {candidate_id}: task {reply.task_id}" + (" (approved before)." if reply.existing else ".")
    return _answered(reply, done)


@pages.post("/evolution/candidates/<candidate_id>/remove")
def remove(candidate_id: str) -> Any:
    reason = request.form.get("reason", "").strip()[:500] or "removed in the console"
    reply = ask(Remove(candidate_id=candidate_id[:64], reason=reason))
    return _answered(reply, f"Removed {candidate_id}.")


@pages.post("/evolution/mode")
def set_mode() -> Any:
    reply = ask(SetMode(mode=request.form.get("mode", "")[:32]))
    if isinstance(reply, Refused):
        return _answered(reply, "")
    return _answered(reply, f"The evolve mode is {reply.mode} (was {reply.previous}).")
