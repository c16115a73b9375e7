"""``enact evolve scan`` and ``enact evolve signals``: the evidence scanner."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from enact.cli._client import expect, request
from enact.cli._options import (
    EXIT_FAILED,
    end_command,
    end_on_failure,
    failure_of,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)

if TYPE_CHECKING:
    from enact.messages.scanner import ScanSummary

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

    One request per batch: --force asks again while a source has records
    pending, printing each batch as it is done, and stops at the first
    failed batch (its records stay pending). Exits 1 when a scan failed or
    one is running."""
    from enact.cli._client import DaemonError, UnexpectedReply
    from enact.messages import to_wire
    from enact.messages.scanner import Scan, ScanReport

    resolved = resolve_home(home)
    done: list[ScanSummary] = []

    def stop(text: str, *, code: int, status: str, fields: Mapping[str, str] | None = None) -> NoReturn:
        """End the drain in one line; with --json, the batches done so far beside why."""
        end_command(text, as_json=as_json, exit_code=code, status=status,
                    fields={**(fields or {}), **to_wire(ScanReport(scans=tuple(done)))["body"]})

    for each in [source] if source else ["feedback", "experience"]:
        first = len(done)
        while True:
            message = Scan(source=each)  # type: ignore[arg-type]  # click checked the choice
            try:
                # One batch, one model call: the daemon's control.request_timeout_s bounds this wait.
                reply = request(resolved, message, timeout=None)
            except DaemonError as error:
                if not done:
                    raise  # nothing scanned yet: reported like any command's
                stop(f"the drain stopped: {error}", code=EXIT_FAILED, status="interrupted")
            refused = failure_of(reply)
            if refused is not None:  # one running already is code busy, exit 1: try again later
                stop(refused.line, status=refused.status, code=refused.code, fields=refused.fields)
            scans = expect(reply, ScanReport, message).scans
            if len(scans) != 1:
                raise UnexpectedReply(f"a scan of {each} answered {len(scans)} summaries, not one")
            summary = scans[0]
            if summary.outcome == "nothing-new" and len(done) > first:
                break  # drained: the batch before already said nothing is pending
            done.append(summary)
            if not as_json:
                click.echo(_summary_line(summary))
            if force and summary.outcome == "failed":
                stop(f"the drain stopped: {summary.source.value} scan {summary.scan_id} failed and its "
                     f"{summary.records} records stay pending: {summary.error}", code=EXIT_FAILED, status="failed")
            if not (force and summary.outcome == "completed" and summary.pending > 0):
                break
    if as_json:
        print_json(to_wire(ScanReport(scans=tuple(done)))["body"])
    if any(summary.outcome == "failed" for summary in done):
        sys.exit(EXIT_FAILED)


def _summary_line(summary: ScanSummary) -> str:
    line = f"{summary.source.value:<10} {summary.outcome:<11}"
    if summary.scan_id:
        line += f" {summary.scan_id}: {summary.records} records, {len(summary.signals)} signals"
    line += f", {summary.pending} pending" if summary.pending else ""
    return line + (f" ({summary.error})" if summary.error else "")


@click.command("signals")
@home_option
@click.option("--state", type=click.Choice(_STATES), default=None, help="Only signals in this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="Show at most this many (the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the signals and how many more there are.")
@needs_daemon
def signals(home: Path | None, state: str | None, limit: int, as_json: bool) -> None:
    """Evidence signals, newest first."""
    from enact.messages import to_wire
    from enact.messages.scanner import SignalList, Signals

    message = Signals(state=state or "", limit=limit)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    page = expect(reply, SignalList, message)
    if as_json:
        print_json(to_wire(page)["body"])
        return
    if not page.signals:
        click.echo("no signals")
    for signal in page.signals:
        explicit = "explicit" if signal.explicit else "inferred"
        click.echo(f"{signal.id}  {signal.state.value:<9} {signal.source.value:<10} {signal.confidence:.2f} "
                   f"{explicit}  {signal.observation}")
        click.echo(f"    refs: {', '.join(signal.evidence_refs)}"
                   + (f"  candidate: {signal.candidate_id}" if signal.candidate_id else ""))
    if page.more:
        click.echo(f"{page.more} more, older (--limit shows more)")
