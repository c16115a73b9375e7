"""``enact lineage scan|list|show|ignore|reset``: the parent agent's changes,
assessed, in an inbox the owner decides on (``enact.evolution.lineage_actor``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from enact.cli._client import expect, request
from enact.cli._options import end_on_failure, fail, home_option, needs_daemon, print_json, resolve_home

if TYPE_CHECKING:
    from enact.messages.lineage import LineageEntry

_STATES = ("pending", "linked", "adopted", "ignored", "refused")


def _wire(value: object) -> Any:
    from enact.messages import to_wire

    return to_wire(value)["body"]


def _line(entry: LineageEntry) -> str:
    candidate = f"  {entry.candidate_id}" if entry.candidate_id else ""
    return f"{entry.id}  {entry.state.value:<8} {entry.assessment.summary[:100]}{candidate}"


@click.group("lineage")
def lineage() -> None:
    """The parent agent's later changes (lineage.parent), each assessed and
    offered as an improvement candidate for the owner to approve."""


@lineage.command("scan")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def scan(home: Path | None, as_json: bool) -> None:
    """Fetch the parent and assess its changes since the last assessed revision.

    Exits non-zero when a model call fails, a reply is malformed or the
    parent's history was rewritten (nothing is recorded then). A change whose
    adaptation reaches into what stays the owner's is recorded refused, not
    offered; `lineage show` says why."""
    from enact.messages.lineage import LineageScanned, Scan

    message = Scan()
    # One model call per change: the daemon waits lineage.scan_timeout_s for them (a long request).
    reply = request(resolve_home(home), message, timeout=None)
    end_on_failure(reply, as_json=as_json)
    scanned = expect(reply, LineageScanned, message)
    if scanned.outcome in ("failed", "rewritten", "not-configured"):
        fail(f"lineage scan {scanned.outcome}: {scanned.error}", as_json=as_json)
    if as_json:
        print_json(_wire(scanned))
        return
    if scanned.outcome == "started":
        click.echo(f"starting from the parent's {scanned.revision[:12]}; its later changes are assessed")
    elif scanned.outcome == "nothing-new":
        click.echo(f"nothing new after {scanned.revision[:12]}; no model called")
    else:
        more = f"; {scanned.remaining} more next scan" if scanned.remaining else ""
        click.echo(f"assessed {len(scanned.entries)} changes up to {scanned.revision[:12]}{more}")
        for entry_id in scanned.entries:
            click.echo(f"{entry_id}  refused (not offered; see lineage show)" if entry_id in scanned.refused
                       else entry_id)


@lineage.command("list")
@click.option("--state", type=click.Choice(_STATES), default=None, help="Only this state.")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of entries).")
@needs_daemon
def list_entries(state: str | None, home: Path | None, as_json: bool) -> None:
    """The assessed parent changes, oldest first."""
    from enact.messages.lineage import LineageList, List

    message = List(state=state or "")
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    listed = expect(reply, LineageList, message)
    if as_json:
        print_json(_wire(listed)["entries"])
        return
    if not listed.entries:
        click.echo("no lineage entries")
    for entry in listed.entries:
        click.echo(_line(entry))


def _shown(entry: LineageEntry, as_json: bool) -> None:
    from enact.messages.lineage import LineageShown

    if as_json:
        print_json(_wire(LineageShown(entry=entry))["entry"])
        return
    a = entry.assessment
    click.echo(_line(entry))
    click.echo(f"commits    {' '.join(c[:12] for c in (entry.commit, *entry.merged))}")
    for label, text in (("change", a.behavioural_change), ("rationale", a.rationale), ("adapt", a.adaptation),
                        ("risks", a.risks), ("files", ", ".join(a.files)), ("tests", a.tests),
                        ("confidence", f"{a.confidence:.2f}")):
        click.echo(f"{label:<10} {text}")
    if entry.reason:
        click.echo(f"{entry.state.value:<10} {entry.reason}")


@lineage.command("show")
@click.argument("entry_id")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def show(entry_id: str, home: Path | None, as_json: bool) -> None:
    """One assessed parent change."""
    from enact.messages.lineage import LineageShown, Show

    message = Show(entry_id=entry_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    _shown(expect(reply, LineageShown, message).entry, as_json)


@lineage.command("ignore")
@click.argument("entry_id")
@click.argument("reason", nargs=-1, required=True)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def ignore(entry_id: str, reason: tuple[str, ...], home: Path | None, as_json: bool) -> None:
    """Ignore a parent change, with the reason."""
    from enact.messages.lineage import Ignore, LineageShown

    message = Ignore(entry_id=entry_id, reason=" ".join(reason))
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    _shown(expect(reply, LineageShown, message).entry, as_json)


@lineage.command("reset")
@click.argument("revision")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def reset(revision: str, home: Path | None, as_json: bool) -> None:
    """Go on from REVISION of the parent (after its history was rewritten)."""
    from enact.messages.lineage import Reset, ResetDone

    message = Reset(revision=revision)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    done = expect(reply, ResetDone, message)
    if as_json:
        print_json(_wire(done))
        return
    click.echo(f"lineage goes on from {done.revision[:12]}")
