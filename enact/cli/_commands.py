"""``enact status``, ``enact call`` and ``enact config show``."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from enact import config
from enact.cli._client import request
from enact.cli._options import home_option, needs_daemon, print_json, resolve_home
from enact.messages import DecodeError, from_wire, to_wire
from enact.messages.control import Status, StatusReport


@click.command("status")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def status(home: Path | None, as_json: bool) -> None:
    """Show the running daemon: generation, actors, storage."""
    report = request(resolve_home(home), Status())
    assert isinstance(report, StatusReport)
    if as_json:
        print_json(to_wire(report)["body"])
        return
    click.echo(f"enact {report.version}  pid {report.pid}  generation {report.generation}  up {report.uptime_s:.0f} s")
    click.echo(f"home     {report.home}")
    click.echo(f"metrics  http://{report.metrics_addr}/metrics")
    used = report.storage.used_bytes / (1 << 20)
    size = report.storage.map_bytes / (1 << 20)
    click.echo(f"storage  {used:.1f} MiB used of a {size:.0f} MiB map ({report.storage.path})")
    click.echo(f"{'actor':<28} {'alive':>5} {'mailbox':>8} {'handled':>9} {'restarts':>9}")
    for actor in report.actors:
        alive = "yes" if actor.alive else "no"
        click.echo(f"{actor.name:<28} {alive:>5} {actor.mailbox:>8} {actor.handled:>9} {actor.restarts:>9}")


@click.command("call")
@home_option
@click.argument("type_name", metavar="TYPE")
@click.argument("body", metavar="[JSON]", required=False, default="{}")
@needs_daemon
def call(home: Path | None, type_name: str, body: str) -> None:
    """Send any registered message TYPE with fields JSON; print the typed reply."""
    try:
        fields = orjson.loads(body)
        message = from_wire({"type": type_name, "body": fields})
    except orjson.JSONDecodeError as error:
        click.echo(f"enact: the message body is not valid JSON: {error}", err=True)
        sys.exit(2)
    except DecodeError as error:
        click.echo(f"enact: {error}", err=True)
        sys.exit(2)
    print_json(to_wire(request(resolve_home(home), message)))


@click.group("config")
def config_group() -> None:
    """Inspect the configuration."""


@config_group.command("show")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def config_show(home: Path | None, as_json: bool) -> None:
    """Print the effective configuration and where each value came from."""
    try:
        settings = config.load(resolve_home(home))
    except config.ConfigError as error:
        click.echo(f"enact: {error}", err=True)
        sys.exit(2)
    rows = settings.describe()
    if as_json:
        print_json(rows)
        return
    for row in rows:
        value = orjson.dumps(row["value"]).decode()
        click.echo(f"{row['key']:<30} {value:<24} ({row['source']})")


COMMANDS = [status, call, config_group]
