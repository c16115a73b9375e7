"""``enact runtime check``: is the selected model runtime usable, and what
is missing if not. It reads the configuration as the daemon would and needs
no running daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from enact.cli._options import EXIT_FAILED, EXIT_USAGE, fail, home_option, print_json, resolve_home

PROBE_PROMPT = "This is a connectivity check from enact. Reply with the single word: ready"
PROBE_TIMEOUT_S = 120.0


@click.group("runtime")
def runtime_group() -> None:
    """The model runtime enact uses."""


@runtime_group.command("check")
@home_option
@click.option("--probe", is_flag=True, help="Also make one tiny real call (it spends a few tokens).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check(home: Path | None, probe: bool, as_json: bool) -> None:
    """Show the selected adapter, whether its binary or endpoint is found and
    its version; exit 1 when something is missing (each problem says what to do)."""
    from enact import components, config

    try:
        installed = components.load()
        settings = installed.load_config(resolve_home(home))
    except (components.ComponentError, config.ConfigError) as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)
    component = installed.runtime(settings)
    found = component.check(settings)
    report: dict[str, Any] = {
        "adapter": component.name,
        "source": settings.sources["runtime.adapter"],
        "found": found.found,
        "version": found.version,
        "problems": list(found.problems),
        "notes": list(found.notes),
    }
    if probe and not found.problems:
        report["probe"] = _probe(component, settings)
    report["ok"] = not found.problems and report.get("probe", {}).get("ok", True)
    if as_json:
        print_json(report)
    else:
        _print(report)
    if not report["ok"]:
        raise SystemExit(EXIT_FAILED)


def _probe(component: Any, settings: Any) -> dict[str, Any]:
    from enact.runtime import RuntimeFailure, RuntimeRequest

    try:
        runtime = component.make_runtime(settings, None)
        result = runtime.invoke(RuntimeRequest(
            session_key="", prompt=PROBE_PROMPT, purpose="probe",
            timeout_s=min(PROBE_TIMEOUT_S, settings["runtime.timeout_s"]),
        ))
    except RuntimeFailure as error:
        return {"ok": False, "kind": error.kind, "error": " ".join(str(error).split())}
    except ValueError as error:  # a runtime that cannot be made (a rules file that does not parse)
        return {"ok": False, "kind": "failed", "error": str(error)}
    usage = result.usage
    return {
        "ok": True, "reply": result.text[:200], "duration_s": round(result.duration_s, 3),
        "usage": {"input": usage.input_tokens, "cached_input": usage.cached_input_tokens,
                  "output": usage.output_tokens, "reasoning": usage.reasoning_tokens},
    }


def _print(report: dict[str, Any]) -> None:
    click.echo(f"adapter  {report['adapter']} (from {report['source']})")
    click.echo(f"found    {report['found'] or 'no'}")
    if report["version"]:
        click.echo(f"version  {report['version']}")
    for note in report["notes"]:
        click.echo(f"note     {note}")
    for problem in report["problems"]:
        click.echo(f"missing  {problem}")
    probe = report.get("probe")
    if probe is not None:
        if probe["ok"]:
            click.echo(f"probe    ok in {probe['duration_s']} s: {probe['reply']!r}")
        else:
            click.echo(f"probe    failed ({probe['kind']}): {probe['error']}")
    click.echo("ok" if report["ok"] else "not usable: fix what is listed above")

