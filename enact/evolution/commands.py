"""Evolution from chat: ``/evolve.candidates``, ``/evolve.show ID``,
``/evolve.approve ID [REPO]``, ``/evolve.remove ID REASON``, through the command
registry.

A model action may list and show candidates; approving and removing need
human authority, which the registry refuses to a model action (and, from
chat, grants only in a locked conversation).
"""

from __future__ import annotations

from typing import TypeVar

from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Param, answered
from enact.messages._registry import Request
from enact.messages.curator import (
    Approve,
    Candidates,
    Remove,
    Show,
)

R = TypeVar("R")

CURATOR = "curator"
_ID = {"text": Param(str, doc="a candidate id", usage="ID")}
_APPROVAL = {"text": Param(str, doc="a candidate id, then optionally the repository's absolute path",
                           usage="ID [REPO]"),
             "repo": Param(str, required=False, doc="the git repository (default: the one enact runs from)")}
_REMOVAL = {"text": Param(str, doc="a candidate id, then the reason", usage="ID REASON")}


def _ask(context: CommandContext, message: Request[R]) -> R:
    return context.ask(CURATOR, message)


def _words(call: CommandCall) -> list[str]:
    return str(call.args.get("text", "")).split()


def _candidate_id(call: CommandCall) -> str:
    words = _words(call)
    if not words:
        raise CommandFailed(f"/{call.name} needs a candidate id, e.g. /{call.name} cand-0123456789ab")
    return words[0]


def _list(_: CommandCall, context: CommandContext) -> str:
    reply = answered(_ask(context, Candidates(state="active", limit=20)))
    if not reply.candidates:
        return "no active candidates"
    return "Active candidates, best first:\n" + "\n".join(
        f"{c.id} ({c.draft.source}, {c.score:.2f}): {c.draft.title}" for c in reply.candidates)


def _show(call: CommandCall, context: CommandContext) -> str:
    candidate_id = _candidate_id(call)
    reply = answered(_ask(context, Show(candidate_id=candidate_id)))
    c, draft = reply.candidate, reply.candidate.draft
    lines = [f"{c.id} {c.state.value} ({draft.source}, {c.score:.2f}): {draft.title}", f"Rationale: {draft.rationale}",
             f"Change: {draft.proposed_change}", f"Benefit: {draft.expected_benefit}", f"Risk: {draft.risk}",
             f"Test plan: {draft.test_plan}"]
    lines += [f"Signal {s.id}: {s.observation}" for s in reply.signals]
    return "\n".join(lines)


def _approve(call: CommandCall, context: CommandContext) -> str:
    candidate_id = _candidate_id(call)
    # `/evolve.approve ID [REPO]`; without one, the daemon's own checkout.
    repo = str(call.args.get("repo", "")) or " ".join(_words(call)[1:])
    reply = answered(_ask(context, Approve(candidate_id=candidate_id, repo=repo, origin=call.origin)))
    if reply.installed:
        return f"candidate {candidate_id} approved: skill {reply.installed} installed"
    if reply.removed:
        return f"candidate {candidate_id} approved: skill {reply.removed} removed"
    return f"candidate {candidate_id} approved: task {reply.task_id} (it ends in a review for you to land)"


def _remove(call: CommandCall, context: CommandContext) -> str:
    words = _words(call)
    if len(words) < 2:
        raise CommandFailed(f"/{call.name} needs a candidate id and a reason, e.g. /{call.name} cand-… done already")
    candidate_id, reason = words[0], " ".join(words[1:])
    answered(_ask(context, Remove(candidate_id=candidate_id, reason=reason, origin=call.origin)))
    return f"candidate {candidate_id} removed"


def evolve_commands() -> list[Command]:
    return [
        Command(name="evolve.candidates", summary="the active improvement candidates", handler=_list),
        Command(name="evolve.show", summary="one improvement candidate", handler=_show, params=_ID),
        Command(name="evolve.approve", summary="approve a candidate: a task that ends in a review",
                handler=_approve, authority=Authority.HUMAN, params=_APPROVAL),
        Command(name="evolve.remove", summary="remove a candidate (/evolve.remove ID REASON)", handler=_remove,
                authority=Authority.HUMAN, params=_REMOVAL),
    ]
