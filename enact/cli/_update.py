"""``enact update [--check]``, ``update rollback`` and ``update history``:
self-update from enact's own repository (``enact.update``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from enact.cli._options import EXIT_FAILED, EXIT_USAGE, fail, home_option, print_json, resolve_home
from enact.messages.common import HUMAN_CLI


def _config(home: Path, as_json: bool) -> Any:
    from enact import components, config

    try:
        return components.load().load_config(home)
    except (components.ComponentError, config.ConfigError) as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)


@click.group(invoke_without_command=True)
@home_option
@click.option("--check", "only_check", is_flag=True, help="Only say what runs, what is authoritative, and "
              "whether an update is possible.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--notify", default="", metavar="CHANNEL:ID",
              help="Also tell this conversation how it ends (what /update in chat passes).")
@click.option("--origin", default=HUMAN_CLI, show_default=True, help="Who asked, as the history records it.")
@click.pass_context
def update(context: click.Context, home: Path | None, only_check: bool, as_json: bool, notify: str,
           origin: str) -> None:
    """Update enact to the head of update.branch in update.repository.

    Installs that revision as a release under the home, runs the
    repository's doctor on it, takes a backup, hands the home to the new
    release's daemon (--takeover) and checks it; when it does not hold, the
    old release takes the home back. Exits 0 when updated, 1 when the
    attempt failed or was rolled back, 2 when no update is possible."""
    if context.invoked_subcommand is not None:
        return
    from enact.update.check import check
    from enact.update.history import REFUSED, UPDATED, UpdateUnderWay
    from enact.update.settings import UpdateSettings
    from enact.update.updater import Updater

    root = resolve_home(home)
    settings = _config(root, as_json)
    if only_check:
        found = check(root, settings.typed(UpdateSettings))
        if as_json:
            print_json(found.as_json())
        else:
            click.echo(f"running: {found.running.revision or 'unknown'} ({found.running.environment})")
            click.echo(f"authoritative: {found.authoritative or 'unknown'} ({found.branch} in "
                       f"{found.repository or 'no repository'})")
            click.echo("an update is possible" if found.possible else f"no update: {found.why_not}")
        return
    try:
        outcome = Updater(root, settings, origin=origin, notify=notify).update()
    except UpdateUnderWay as error:
        fail(str(error), as_json=as_json, code=EXIT_FAILED)
    _print_outcome(outcome, as_json)
    if outcome.outcome != UPDATED:
        raise SystemExit(EXIT_USAGE if outcome.outcome == REFUSED else EXIT_FAILED)


def _print_outcome(outcome: Any, as_json: bool) -> None:
    if as_json:
        print_json({"attempt": outcome.attempt, "outcome": outcome.outcome, "reason": outcome.reason,
                    "serving": outcome.serving.as_record()})
    else:
        click.echo(f"{outcome.outcome}: {outcome.reason} (attempt {outcome.attempt})")


@update.command("rollback")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rollback(home: Path | None, as_json: bool) -> None:
    """Hand the home back to the release that served before this one."""
    from enact.update.history import ROLLED_BACK, UpdateUnderWay
    from enact.update.updater import Updater

    root = resolve_home(home)
    try:
        outcome = Updater(root, _config(root, as_json)).rollback()
    except UpdateUnderWay as error:
        fail(str(error), as_json=as_json, code=EXIT_FAILED)
    _print_outcome(outcome, as_json)
    if outcome.outcome != ROLLED_BACK:
        raise SystemExit(EXIT_FAILED)


@update.command("history")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def history(home: Path | None, as_json: bool) -> None:
    """Every update and rollback attempt, oldest first, with its outcome."""
    from enact.update.history import Journal

    attempts = Journal(resolve_home(home)).attempts()
    if as_json:
        print_json([attempt.as_json() for attempt in attempts])
        return
    if not attempts:
        click.echo("no update was attempted on this home")
    for attempt in attempts:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(attempt.started_at))
        target = attempt.to_revision[:12] or "-"
        last = f" at {attempt.steps[-1]}" if attempt.outcome == "unfinished" and attempt.steps else ""
        click.echo(f"{started}  {attempt.kind} {attempt.from_release.short} -> {target}  "
                   f"{attempt.outcome}{last}: {attempt.reason}  [{attempt.id}, {attempt.origin}]")
