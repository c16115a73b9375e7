"""``enact status``, ``enact call`` and ``enact config show``."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import orjson

from enact.cli._client import DaemonError, request, send
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_USAGE,
    Failure,
    end_on_failure,
    fail,
    failure_of,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)
from enact.wording import counted


@click.command("status")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--verbose", "-v", is_flag=True,
              help="Also each actor's mailbox, messages handled and restarts, and the storage and its schema "
                   "versions.")
@needs_daemon
def status(home: Path | None, as_json: bool, verbose: bool) -> None:
    """Show the running daemon: generation, actors, channels, tokens spent today."""
    from enact.messages import to_wire
    from enact.messages.control import Status

    message = Status(brief=not verbose)
    where = resolve_home(home)
    report = request(where, message)
    from enact.messages.tasks import Leases  # after the first request: it costs a start-up

    # The queue knows which worker holds which task (its leases).
    leases = request(where, Leases())
    from enact.messages.workers import RemoteWorkers

    # Where each attempt on a Ray cluster runs (none with the local backend).
    try:
        remote = request(where, RemoteWorkers()).workers
    except DaemonError:  # a daemon without the task workers
        remote = ()
    nodes = {worker.worker_id.partition("@")[0]: worker.node for worker in remote}
    workers = _workers(report, leases, nodes)
    if as_json:
        shown = to_wire(report)["body"]
        if not verbose:  # asked for only with --verbose: not there, rather than empty
            del shown["actors"], shown["storage"]
        print_json({**shown, "tasks": to_wire(leases)["body"], "workers": workers})
        return
    click.echo(f"enact {report.version}  pid {report.pid}  generation {report.generation}  up {report.uptime_s:.0f} s")
    click.echo(f"home     {report.home}  id {report.home_id}")
    click.echo(f"metrics  http://{report.metrics_addr}/metrics")
    click.echo(f"runtime  {report.runtime}")
    click.echo(f"confinement  {report.confinement}")
    click.echo(f"actors   {_actors_line(report)}")
    if report.storage is not None:
        used = report.storage.used_bytes / (1 << 20)
        size = report.storage.map_bytes / (1 << 20)
        click.echo(f"storage  {used:.1f} MiB used of a {size:.0f} MiB map ({report.storage.path})")
        click.echo(f"schemas  {_schema_summary(report.storage.schemas)}")
    if report.actors:
        click.echo(f"{'actor':<28} {'alive':>5} {'mailbox':>8} {'handled':>9} {'restarts':>9}")
        for actor in report.actors:
            alive = "yes" if actor.alive else "no"
            click.echo(f"{actor.name:<28} {alive:>5} {actor.mailbox:>8} {actor.handled:>9} {actor.restarts:>9}")
    click.echo("tokens today" + ("" if report.spending else "  none"))
    for spent in report.spending:
        cost = f", ${spent.cost_usd:.4f}" if spent.cost_usd is not None else ""
        calls = counted(spent.calls, "call")
        click.echo(f"  {spent.purpose:<14} {spent.input_tokens} in ({spent.cached_input_tokens} cached), "
                   f"{spent.output_tokens} out ({spent.reasoning_tokens} reasoning), {calls}{cost}")
    _echo_budget(report)
    for channel in report.channels:
        failures = channel.delivery_failures
        refused = f", {counted(failures, 'reply', 'replies')} refused" if failures else ""
        error = f"; last error: {channel.last_error}" if channel.last_error else ""
        click.echo(f"channel  {channel.name}: {channel.state}{refused}{error}")
    shown_workers = ", ".join(
        f"{worker['name']} idle" if worker["task"] is None
        else f"{worker['name']} on task {worker['task']}" + (f" ({worker['progress']})" if worker["progress"] else "")
        + (f" on the Ray node {worker['node']}" if worker.get("node") else "")
        for worker in workers
    )
    click.echo(f"workers  {shown_workers or 'none (daemon.workers = 0)'}; {leases.queued} task(s) queued")


def _actors_line(report: Any) -> str:
    """How many actors run, then only what is out of the ordinary: those
    stopped, restarted or with messages waiting."""
    said = [f"{len(report.actor_names) - len(report.stopped)} of {len(report.actor_names)} running"]
    if report.stopped:
        said.append("stopped: " + ", ".join(report.stopped))
    if report.restarts:
        said.append("restarted: " + ", ".join(f"{name} ({count}x)" for name, count in report.restarts.items()))
    if report.waiting:
        said.append("waiting: " + ", ".join(f"{name} ({count})" for name, count in report.waiting.items()))
    return "; ".join(said)


def _echo_budget(report: Any) -> None:
    """Today's use against the budget, each purpose with a budget or with use, then the total."""
    import time

    if not any(line.limit for line in report.budget):
        click.echo("budget   none set (budget.daily_tokens.*)")
        return
    click.echo(f"budget   today's, until {time.strftime('%H:%M', time.localtime(report.budget_resets_at))}")
    for line in report.budget:
        if line.limit:
            left = f"{line.remaining} left" if line.remaining else "spent"
            click.echo(f"  {line.purpose:<14} {line.used} of {line.limit} tokens, {left}")
        else:
            click.echo(f"  {line.purpose:<14} {line.used} tokens (no budget)")


def _schema_summary(schemas: Any) -> str:
    """Databases at version 1 are counted; any later one is named."""
    by_version: dict[int, list[str]] = {}
    for schema in schemas:
        by_version.setdefault(schema.version, []).append(schema.database)
    said = [counted(len(names), "database") + " at version 1" if version == 1
            else f"{', '.join(sorted(names))} at version {version}"
            for version, names in sorted(by_version.items())]
    return "; ".join(said) or "none recorded"


def _workers(report: Any, leases: Any, nodes: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each worker of the pool, idle or with the task it holds; a lease held
    by a worker that is not running (a worker of the daemon this one
    replaced, until the lease expires) is listed under its own id."""
    running = sorted((name for name in report.actor_names if name.startswith("worker:")),
                     key=lambda name: (len(name), name))
    held = {}
    for lease in leases.leases:
        name = lease.worker_id.partition("@")[0]
        held[name if name in running and name not in held else lease.worker_id] = lease
    return [
        {"name": name, "task": held[name].task_id if name in held else None,
         "progress": held[name].progress if name in held else "", "node": (nodes or {}).get(name, "")}
        for name in [*running, *(name for name in held if name not in running)]
    ]


def _request_types() -> list[dict[str, Any]]:
    """Every type ``enact call`` may send, with its fields, its protocol
    (the wire name's prefix) and whether it is plumbing (one enact sends
    itself, ``Registration.plumbing``). ``origin`` is left out: the daemon
    sets it from who is asking."""
    from enact.messages import Kind, registered

    types = []
    for registration in registered():
        if registration.kind is not Kind.REQUEST:
            continue
        fields = []
        for item in dataclasses.fields(registration.cls):
            if item.name == "origin":
                continue
            has_default = item.default is not dataclasses.MISSING or item.default_factory is not dataclasses.MISSING
            described: dict[str, Any] = {"name": item.name, "type": str(item.type), "required": not has_default}
            if item.default is not dataclasses.MISSING:
                described["default"] = item.default
            elif item.default_factory is not dataclasses.MISSING:
                described["default"] = item.default_factory()
            fields.append(described)
        types.append({"type": registration.name, "protocol": registration.actor,
                      "summary": _first_paragraph(registration.cls.__doc__), "internal": registration.plumbing,
                      "fields": fields})
    return types


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n", 1)[0].split())


def _protocol_summary(described: dict[str, Any]) -> str:
    """What a protocol is for: the first sentence of the module that
    declares it (an extension's too)."""
    from enact.messages import lookup

    registration = lookup(described["type"])
    module = sys.modules.get(registration.cls.__module__) if registration else None
    sentence = _first_paragraph(module.__doc__ if module else None).replace("``", "").split(". ", 1)[0]
    return textwrap.shorten(sentence.rstrip("."), 100, placeholder=" ...")


def _load_extensions(as_json: bool) -> None:
    """Import the installed extensions, only when a command needs their types:
    reading entry points costs every other command nothing."""
    from enact import components

    try:
        components.load()
    except components.ComponentError as error:
        fail(str(error), as_json=as_json)


def _print_request_types(as_json: bool, with_internal: bool) -> None:
    every = _request_types()
    internal = [described for described in every if described["internal"]]
    if as_json:
        print_json(every if with_internal else [described for described in every if not described["internal"]])
        return
    _print_by_protocol([described for described in every if not described["internal"]])
    if with_internal:
        click.echo("\ninternal: the requests enact sends itself (the wire takes them, for tools and tests)\n")
        _print_by_protocol(internal)
    else:
        click.echo(f"\n{counted(len(internal), 'internal request')} (the ones enact sends itself) not shown: "
                   "`enact call --list --all` lists them")


def _print_by_protocol(types: list[dict[str, Any]]) -> None:
    """One heading per protocol (its name and what it is for), its
    requests under it with their fields."""
    protocol = None
    for described in types:
        if described["protocol"] != protocol:
            protocol = described["protocol"]
            gap = "" if protocol == types[0]["protocol"] else "\n"
            click.echo(f"{gap}{protocol}: {_protocol_summary(described)}")
        fields = ", ".join(
            f"{f['name']}: {f['type']}" + ("" if f["required"] else f" = {orjson.dumps(f.get('default')).decode()}")
            for f in described["fields"]
        )
        click.echo(f"  {described['type']} {{{fields}}}")


@click.command("call")
@home_option
@click.option("--list", "list_types", is_flag=True,
              help="List the request types TYPE may be, with their fields, by protocol.")
@click.option("--all", "with_internal", is_flag=True,
              help="With --list: also the internal requests, the ones enact sends itself.")
@click.option("--json", "as_json", is_flag=True, help="Errors (and --list) as JSON; the reply is JSON anyway.")
@click.argument("type_name", metavar="TYPE", required=False)
@click.argument("body", metavar="[JSON]", required=False, default="{}")
@needs_daemon
def call(home: Path | None, list_types: bool, with_internal: bool, as_json: bool, type_name: str | None,
         body: str) -> None:
    """Send any registered message TYPE with fields JSON; print the typed reply."""
    from enact.messages import DecodeError, from_wire, lookup, to_wire

    if list_types or (type_name and lookup(type_name) is None):
        _load_extensions(as_json)  # their wire types register as they load
    if list_types:
        _print_request_types(as_json, with_internal)
        return
    if not type_name:
        fail("missing TYPE (`enact call --list` lists them)", as_json=as_json, code=EXIT_USAGE)
    try:
        fields = orjson.loads(body)
        message = from_wire({"type": type_name, "body": fields})
    except orjson.JSONDecodeError as error:
        fail(f"the message body is not valid JSON: {error}", as_json=as_json, code=EXIT_USAGE)
    except DecodeError as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)
    reply = send(resolve_home(home), message)
    print_json(to_wire(reply))
    failure = failure_of(reply) or _receipt_failure(reply)
    if failure is not None:  # the typed reply is printed as it is; the exit code says it as everywhere
        sys.exit(failure.code)


def _receipt_failure(reply: object) -> Failure | None:
    """A command run by name (``commands.Run``) that did not succeed, in the
    statuses and exit codes of ``failure_of``: its receipt is a reply of its
    own, not a refusal, so that a chat can show its text."""
    from enact.cli._client import is_reply

    if not is_reply(reply, "commands.Receipt"):
        return None
    from enact.messages.commands import CommandOutcome, Receipt

    if not isinstance(reply, Receipt) or reply.ok:
        return None
    if reply.outcome is CommandOutcome.BAD_ARGS:
        return Failure("bad_input", EXIT_USAGE, reply.text)
    if reply.outcome is CommandOutcome.UNKNOWN_COMMAND:
        return Failure("not_found", EXIT_USAGE, reply.text, {"kind": "command", "id": reply.command})
    if reply.outcome in (CommandOutcome.NOT_FOUND, CommandOutcome.REFUSED):
        return Failure(reply.outcome.value, EXIT_USAGE, reply.text)
    return Failure("failed", EXIT_FAILED, reply.text)


@click.group("config")
def config_group() -> None:
    """Inspect the configuration."""


VALUE_COLUMN_MAX = 32
"""Longer values (a list of paths) overrun their column rather than widen it for every row."""


@config_group.command("show")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def config_show(home: Path | None, as_json: bool) -> None:
    """Print the configuration the running daemon runs with (with none
    running, this shell's view: what a daemon started here would run with),
    where each value came from and which component declares it (``core``:
    the daemon itself). Secrets only say whether they are set."""
    where = resolve_home(home)
    running = _running_daemons_config(where, as_json)
    if running is not None:
        pid, rows = running
        said = f"the configuration of the running daemon (pid {pid}, home {where})"
    else:
        rows = _this_shells_config(where, as_json)
        said = f"this shell's view of the configuration: no daemon is running (home {where})"
    if as_json:
        print_json({"from": "daemon" if running else "shell", "pid": running[0] if running else None,
                    "home": str(where), "settings": rows})
        return
    click.echo(said)
    _print_settings(rows)


def _running_daemons_config(where: Path, as_json: bool) -> tuple[int, list[dict[str, Any]]] | None:
    """The running daemon's pid and its settings' rows, or None if no daemon
    runs on ``where``."""
    from enact.cli._client import DaemonError, NotRunning
    from enact.messages import to_wire
    from enact.messages.control import GetConfig

    try:
        report = request(where, GetConfig())
    except NotRunning:
        return None
    except DaemonError as error:
        end_on_failure(error, as_json=as_json)
        raise  # not reached: a DaemonError is a failure
    return report.pid, list(to_wire(report)["body"]["settings"])


def _this_shells_config(where: Path, as_json: bool) -> list[dict[str, Any]]:
    from enact import components, config

    try:
        # The installed extensions' settings are part of the configuration.
        return components.load().load_config(where).describe()
    except (components.ComponentError, config.ConfigError) as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)


def _print_settings(rows: list[dict[str, Any]]) -> None:
    """One row a key, its columns as wide as their content."""
    values = [orjson.dumps(row["value"]).decode() for row in rows]
    widths = [max((len(text) for text in column), default=0) for column in (
        [row["key"] for row in rows],
        [value for value in values if len(value) <= VALUE_COLUMN_MAX],
        [row["component"] for row in rows],
        [f"({row['source']})" for row in rows],
    )]
    for row, value in zip(rows, values, strict=True):
        cells = (row["key"], value, row["component"], f"({row['source']})")
        line = "  ".join(f"{cell:<{width}}" for cell, width in zip(cells, widths, strict=True))
        click.echo(f"{line}  [{row['allowed']}]")
