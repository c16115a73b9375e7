"""``enact evolve mode [disabled|co-evolve|auto-evolve]``: show or set what
the scheduled evolve run may do (the curator stores it; the evolve actor runs
the schedule and keeps its clock, so showing asks both)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import click
import orjson

from enact.cli._client import expect, request
from enact.cli._options import end_on_failure, home_option, needs_daemon, print_json, resolve_home

_MODES = ("disabled", "co-evolve", "auto-evolve")


def _when(moment: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment)) if moment is not None else "never"


@click.command("mode")
@click.argument("mode", required=False, type=click.Choice(_MODES))
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def mode(mode: str | None, home: Path | None, as_json: bool) -> None:
    """Show the evolve mode, schedule, next due and last run; with MODE, set it.

    disabled: no scheduled runs. co-evolve (default): scheduled scans and
    proposals, reported to you, never approved for you. auto-evolve: that,
    and brainstorming from evolve.theme (or the mission) once a day."""
    from enact.messages.curator import GetMode, ModeSet, SetMode
    from enact.messages.evolve import GetClock

    where = resolve_home(home)
    if mode is not None:
        message = SetMode(mode=mode)
        reply = request(where, message)
        end_on_failure(reply, as_json=as_json)
        changed = expect(reply, ModeSet, message)
        if as_json:
            print_json(orjson.loads(orjson.dumps(changed)))
            return
        click.echo(f"evolve mode: {changed.mode} (was {changed.previous})")
        return
    shown = request(where, GetMode())
    clock = request(where, GetClock())
    if as_json:
        print_json(dataclasses.asdict(shown) | dataclasses.asdict(clock))  # one object, the fields `--json` always had
        return
    source = "set by `enact evolve mode`" if shown.stored else "from evolve.mode"
    click.echo(f"mode:      {shown.mode} ({source})")
    click.echo(f"schedule:  {clock.schedule}")
    click.echo(f"next due:  {_when(clock.next_due_at)}")
    click.echo(f"last run:  {_when(clock.last_run_at)}")
    if clock.last_outcome:
        click.echo("last outcome:\n  " + clock.last_outcome.replace("\n", "\n  "))
