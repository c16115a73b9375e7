"""``enact evolve scan`` and ``enact evolve signals``: the evidence scanner."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from enact.cli._client import expect, request
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_USAGE,
    fail,
    fail_if_rejected,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)

_STATES = ("active", "linked", "dismissed", "resolved")


@click.command("scan")
@home_option
@click.option("--source", type=click.Choice(["feedback", "experience"]), default=None,
              help="Scan only this source (default: both).")
@click.option("--force", is_flag=True, help="Scan every pending batch, not just one per source.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one summary per scan).")
@needs_daemon
def scan(home: Path | None, source: str | None, force: bool, as_json: bool) -> None:
    """Scan the turns and tasks new since the last scan for evidence signals.

    Exits 1 when a scan failed (its records stay pending) or one is running."""
    from enact.messages import to_wire
    from enact.messages.common import Rejected
    from enact.messages.scanner import SCAN_RUNNING, Scan, ScanReport

    message = Scan(source=source or "", force=force)  # type: ignore[arg-type]  # click checked the choice
    # A forced scan may make several model calls: wait as long as the daemon may take.
    reply = request(resolve_home(home), message, timeout=None)
    if isinstance(reply, Rejected):  # one running already is no usage error: try again later
        fail(reply.reason, as_json=as_json, status="rejected",
             code=EXIT_FAILED if reply.reason == SCAN_RUNNING else EXIT_USAGE)
    report = expect(reply, ScanReport, message)
    if as_json:
        print_json(to_wire(report)["body"])
    else:
        for summary in report.scans:
            line = f"{summary.source.value:<10} {summary.outcome:<11}"
            if summary.scan_id:
                line += f" {summary.scan_id}: {summary.records} records, {len(summary.signals)} signals"
            line += f", {summary.pending} pending" if summary.pending else ""
            click.echo(line + (f" ({summary.error})" if summary.error else ""))
    if any(summary.outcome == "failed" for summary in report.scans):
        sys.exit(EXIT_FAILED)


@click.command("signals")
@home_option
@click.option("--state", type=click.Choice(_STATES), default=None, help="Only signals in this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of signals).")
@needs_daemon
def signals(home: Path | None, state: str | None, limit: int, as_json: bool) -> None:
    """Evidence signals, newest first."""
    from enact.messages import to_wire
    from enact.messages.scanner import SignalList, Signals

    message = Signals(state=state or "", limit=limit)
    reply = request(resolve_home(home), message)
    fail_if_rejected(reply, as_json=as_json)
    found = expect(reply, SignalList, message).signals
    if as_json:
        body: list[Any] = to_wire(reply)["body"]["signals"]
        print_json(body)
        return
    if not found:
        click.echo("no signals")
    for signal in found:
        explicit = "explicit" if signal.explicit else "inferred"
        click.echo(f"{signal.id}  {signal.state.value:<9} {signal.source.value:<10} {signal.confidence:.2f} "
                   f"{explicit}  {signal.observation}")
        click.echo(f"    refs: {', '.join(signal.evidence_refs)}"
                   + (f"  candidate: {signal.candidate_id}" if signal.candidate_id else ""))
