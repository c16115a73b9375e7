"""``enact evolve candidates|show|propose|approve|remove|history``: improvement
candidates, the curator's proposals and the owner's decisions on them.

The group also carries the scanner's ``scan`` and ``signals``
(``enact.cli._evolve_scan``) and ``mode`` (``enact.cli._evolve_mode``),
wherever those modules are installed."""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from enact.cli._client import expect, request
from enact.cli._options import EXIT_USAGE, end_on_failure, fail, home_option, needs_daemon, print_json, resolve_home
from enact.cli._repo import repo_option, sent_repo

if TYPE_CHECKING:
    from enact.evolution.candidates import Candidate
    from enact.messages.curator import EvolveHistory, Proposal
    from enact.messages.scanner import ScanHistory

_OTHERS = {"enact.cli._evolve_scan": ("scan", "signals"), "enact.cli._evolve_mode": ("mode",)}
"""The other evolution commands, by module."""


def _wire(value: object) -> Any:
    from enact.messages import to_wire

    return to_wire(value)["body"]


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    """A candidate as the commands print it: its draft's fields beside the
    rest, as they were before a candidate held its draft."""
    from enact.messages.curator import CandidateList

    body: dict[str, Any] = _wire(CandidateList(candidates=(candidate,)))["candidates"][0]
    draft = body.pop("draft")
    return {"id": body.pop("id"), **draft, **body}


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    from enact.messages.curator import Proposed

    body: dict[str, Any] = _wire(Proposed(proposal=proposal))["proposal"]
    return body


@click.group("evolve")
def evolve() -> None:
    """Evolution: evidence from turns and tasks, improvement candidates, and
    the owner's approval of one into an ordinary task that ends in a review."""


for _module, _names in _OTHERS.items():
    if find_spec(_module) is not None:
        for _name in _names:
            evolve.add_command(getattr(importlib.import_module(_module), _name))


def _line(candidate: Candidate) -> str:
    task = f"  task {candidate.task_id}" if candidate.task_id is not None else ""
    mark = " [brainstorm]" if candidate.brainstorm else ""
    return (f"{candidate.id}  {candidate.state.value:<8} {candidate.score:.3f}  {candidate.draft.source:<10} "
            f"{candidate.draft.title}{mark}{task}")


@evolve.command("candidates")
@click.option("--state", type=click.Choice(["active", "approved", "adopted", "removed", "rejected"]), default=None,
              help="Only this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of candidates).")
@needs_daemon
def candidates(state: str | None, limit: int, home: Path | None, as_json: bool) -> None:
    """The candidates, best ranked first (each source keeps a place)."""
    from enact.messages.curator import CandidateList, Candidates

    message = Candidates(state=state or "", limit=limit)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    found = expect(reply, CandidateList, message).candidates
    if as_json:
        print_json([candidate_json(candidate) for candidate in found])
        return
    if not found:
        click.echo("no candidates")
    for candidate in found:
        click.echo(_line(candidate))


@evolve.command("show")
@click.argument("candidate_id")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def show(candidate_id: str, home: Path | None, as_json: bool) -> None:
    """One candidate: its fields, its evidence signals and its history."""
    from enact.messages.curator import CandidateShown, Show

    message = Show(candidate_id=candidate_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    shown = expect(reply, CandidateShown, message)
    if as_json:
        print_json({**_wire(shown), "candidate": candidate_json(shown.candidate)})
        return
    candidate = shown.candidate
    click.echo(_line(candidate))
    for label, text in (("rationale", candidate.draft.rationale), ("change", candidate.draft.proposed_change),
                        ("benefit", candidate.draft.expected_benefit), ("risk", candidate.draft.risk),
                        ("test plan", candidate.draft.test_plan)):
        click.echo(f"{label:<10} {text}")
    if candidate.review_id:
        click.echo(f"review     {candidate.review_id}")
    for signal in shown.signals:
        click.echo(f"signal     {signal.id} {signal.state} ({signal.confidence:.2f}"
                   f"{', explicit' if signal.explicit else ''}): {signal.observation} "
                   f"[{', '.join(signal.evidence_refs)}]")
    if shown.signals_note:
        click.echo(f"signals    {shown.signals_note}")
    for event in shown.audit:
        click.echo(f"history    {event.kind}{': ' + event.detail if event.detail else ''}")


@evolve.command("propose")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def propose(home: Path | None, as_json: bool) -> None:
    """Synthesise candidates from new signals and ask which to do next."""
    from enact.messages.curator import Propose, Proposed

    message = Propose()
    # Two model calls: wait as long as the daemon may take.
    reply = request(resolve_home(home), message, timeout=None)
    end_on_failure(reply, as_json=as_json)
    proposed = expect(reply, Proposed, message)
    if as_json:
        print_json({**proposal_json(proposed.proposal), "synthesised": list(proposed.synthesised),
                    "synthesis_note": proposed.synthesis_note})
        return
    proposal = proposed.proposal
    if proposed.synthesised:
        click.echo(f"synthesised {', '.join(proposed.synthesised)}")
    if proposed.synthesis_note:
        click.echo(f"synthesis: {proposed.synthesis_note}")
    what = proposal.candidate_id or "nothing now"
    click.echo(f"proposal {proposal.id}: {what}{' (fallback)' if proposal.fallback else ''}")
    click.echo(f"reason    {proposal.reason}")
    if proposal.guidance:
        click.echo(f"guidance  {proposal.guidance}")
    for suggestion in proposal.removal_suggestions:
        click.echo(f"remove?   {suggestion.id}: {suggestion.candidate_id} {suggestion.removal_class.value}: "
                   f"{suggestion.reason}")


@evolve.command("approve")
@click.argument("candidate_id")
@repo_option("the git checkout the daemon runs enact from, else tasks.default_repo")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def approve(candidate_id: str, repo: Path | None, home: Path | None, as_json: bool) -> None:
    """Queue the candidate as a task that ends in a review (never merged by enact)."""
    from enact.messages.curator import Approve, Approved

    message = Approve(candidate_id=candidate_id, repo=sent_repo(repo))
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    approved = expect(reply, Approved, message)
    if as_json:
        print_json(_wire(approved))
        return
    again = " (approved before)" if approved.existing else ""
    if approved.installed:
        click.echo(f"candidate {approved.candidate_id} approved: skill {approved.installed} installed")
        return
    if approved.removed:
        click.echo(f"candidate {approved.candidate_id} approved: skill {approved.removed} removed")
        return
    click.echo(f"candidate {approved.candidate_id} approved: task {approved.task_id}{again}")


@evolve.command("remove")
@click.argument("candidate_id")
@click.option("--reason", required=True, help="Why it is removed (kept in its history).")
@click.option("--suggestion", "suggestion_id", default="", help="The removal suggestion this follows (prop-N-rM).")
@click.option("--class", "removal_class", default="",
              type=click.Choice(["", "duplicate", "superseded", "obsolete", "already-resolved", "not-actionable"]),
              help="With --suggestion: the class you read; it must be the suggestion's.")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def remove(candidate_id: str, reason: str, suggestion_id: str, removal_class: str, home: Path | None,
           as_json: bool) -> None:
    """Remove a candidate (its record and history stay)."""
    from enact.messages.curator import Remove, Removed

    if removal_class and not suggestion_id:
        fail("--class goes with --suggestion", as_json=as_json, code=EXIT_USAGE)
    message = Remove(candidate_id=candidate_id, reason=reason, suggestion_id=suggestion_id,
                     removal_class=removal_class)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    removed = expect(reply, Removed, message)
    if as_json:
        print_json(candidate_json(removed.candidate))
        return
    click.echo(f"candidate {removed.candidate.id} removed")


@evolve.command("history")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def history(limit: int, home: Path | None, as_json: bool) -> None:
    """What the curator did and the owner decided, and the scans (a failed
    one with its error), newest first as the other lists are; with --json,
    the same order in `timeline`."""
    import time

    from enact.messages import scanner
    from enact.messages.curator import EvolveHistory, History

    message = History(limit=limit)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    found = expect(reply, EvolveHistory, message)
    scans_asked = scanner.History(limit=limit)
    scans = request(resolve_home(home), scans_asked)
    timeline = _newest_first(found, scans, limit)
    if as_json:
        events, scan_records = _wire(found), _wire(scans)["scans"]
        print_json({**events, "scans": scan_records,
                    "timeline": [{"at": at, "scan": scan_records[index]} if what == "scan"
                                 else {"at": at, "event": events["events"][index]}
                                 for at, what, index in timeline]})
        return
    if not timeline:
        click.echo("no history")
    for at, what, index in timeline:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
        if what == "scan":
            record = scans.scans[index]
            detail = record.error if record.error else f"{record.records} records, {len(record.signals)} signals"
            click.echo(f"{when}  {'scan ' + record.outcome:<18} {record.id} {record.source.value}  {detail}")
        else:
            event = found.events[index]
            about = " ".join(part for part in (event.candidate_id, event.proposal_id) if part)
            click.echo(f"{when}  {event.kind:<18} {about}  {event.detail}".rstrip())


def _newest_first(found: EvolveHistory, scans: ScanHistory, limit: int) -> list[tuple[float, str, int]]:
    """The curator's events and the scans in one list, newest first, at most
    ``limit``: (when, "event" or "scan", its index in its own list). Each list
    comes newest first by when it was stored; the sort is stable, so a tie
    keeps that order, and an event before a scan of the same moment."""
    entries = [(event.at, "event", index) for index, event in enumerate(found.events)]
    entries += [(record.finished_at, "scan", index) for index, record in enumerate(scans.scans)]
    return sorted(entries, key=lambda entry: -entry[0])[:limit]
