"""``enact runtime check``: is the selected model runtime usable, and what
is missing if not. It reads the configuration as the daemon would and needs
no running daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from enact.cli._options import EXIT_FAILED, EXIT_USAGE, fail, home_option, print_json, resolve_home

PROBE_PROMPT = "This is a connectivity check from enact. Reply with the single word: ready"
PROBE_TIMEOUT_S = 30.0
"""How long ``--probe`` waits for its answer by default (``--timeout``)."""
PROBE_GRACE_S = 5.0
"""How much longer it waits for a runtime that does not stop at its timeout
(a name lookup that hangs, say) before it reports the timeout all the same."""


@click.group("runtime")
def runtime_group() -> None:
    """The model runtime enact uses."""


@runtime_group.command("check")
@home_option
@click.option("--probe", is_flag=True, help="Also make one tiny real call (it spends a few tokens).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=PROBE_TIMEOUT_S, show_default=True,
              help="Seconds --probe (or --worker) waits for the answer (at most runtime.timeout_s).")
@click.option("--worker", is_flag=True,
              help="Check it on each node of the Ray cluster (tasks.backend = ray) instead of here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check(home: Path | None, probe: bool, timeout_s: float, worker: bool, as_json: bool) -> None:
    """Show the selected adapter, whether its binary or endpoint is found and
    its version; exit 1 when something is missing (each problem says what to do)."""
    from enact import components, config

    try:
        installed = components.load()
        settings = installed.load_config(resolve_home(home))
    except (components.ComponentError, config.ConfigError) as error:
        fail(str(error), as_json=as_json, code=EXIT_USAGE)
    component = installed.runtime(settings)
    if worker:
        _check_nodes(component.name, settings, timeout_s, as_json=as_json)
        return
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
        report["probe"] = _probe(component, settings, min(timeout_s, settings.typed(config.RuntimeSettings).timeout_s))
    report["ok"] = not found.problems and report.get("probe", {}).get("ok", True)
    if as_json:
        print_json(report)
    else:
        _print(report)
    if not report["ok"]:
        raise SystemExit(EXIT_FAILED)


def _check_nodes(adapter: str, settings: Any, timeout_s: float, *, as_json: bool) -> None:
    """``--worker``: the check on each node of the Ray cluster, as the node finds its CLIs."""
    import importlib.util

    from enact.tasks.settings import TasksSettings

    if settings.typed(TasksSettings).backend != "ray":
        fail("--worker checks the runtime on the nodes of a Ray cluster; tasks.backend is local",
             as_json=as_json, code=EXIT_USAGE)
    if importlib.util.find_spec("ray") is None:
        fail("--worker needs Ray: pip install 'enact[ray]'", as_json=as_json, code=EXIT_USAGE)
    from enact.tasks.ray_backend import ClusterUnavailable, check_nodes

    try:
        nodes = check_nodes(settings, timeout_s)
    except ClusterUnavailable as error:
        fail(str(error), as_json=as_json, code=EXIT_FAILED)
    ok = bool(nodes) and not any(node["problems"] for node in nodes)
    if as_json:
        print_json({"adapter": adapter, "source": settings.sources["runtime.adapter"], "nodes": nodes, "ok": ok})
    else:
        click.echo(f"adapter  {adapter} (from {settings.sources['runtime.adapter']})")
        for node in nodes:
            state = f"found {node['found']}" + (f" {node['version']}" if node["version"] else "") \
                if not node["problems"] else "missing " + "; ".join(node["problems"])
            click.echo(f"node     {node['node']}: {state}")
        click.echo("ok" if ok else "not usable: " + ("no node of the cluster can take an attempt" if not nodes
                                                     else "fix what is listed above on those nodes"))
    if not ok:
        raise SystemExit(EXIT_FAILED)


def _probe(component: Any, settings: Any, timeout_s: float) -> dict[str, Any]:
    """One tiny call, bounded: the runtime is given ``timeout_s``, and one
    that does not stop by then (plus a grace) is reported timed out anyway."""
    import threading

    from enact.cancellation import CancellationToken
    from enact.runtime import RuntimeRequest

    try:
        runtime = component.make_runtime(settings, None)
    except ValueError as error:  # a runtime that cannot be made (a rules file that does not parse)
        return {"ok": False, "kind": "failed", "error": str(error)}
    waited_for = runtime.waits_for
    cancel = CancellationToken()
    request = RuntimeRequest(session_key="", prompt=PROBE_PROMPT, purpose="probe", timeout_s=timeout_s,
                             cancel=cancel)
    answers: list[dict[str, Any]] = []
    call = threading.Thread(target=lambda: answers.append(_call(runtime, request)), name="probe", daemon=True)
    call.start()
    call.join(timeout_s + PROBE_GRACE_S)
    if not answers:
        cancel.cancel("the probe's time is up")
        answers.append({"ok": False, "kind": "timeout", "error": f"the {component.name} runtime did not stop "
                                                                 f"at its timeout of {timeout_s:g} s"})
    answer = answers[0]
    answer["waited_for"] = waited_for
    if answer.get("kind") == "timeout":
        answer["error"] = f"no answer within {timeout_s:g} s from {waited_for} ({answer['error']})"
    return answer


def _call(runtime: Any, request: Any) -> dict[str, Any]:
    from enact.runtime import RuntimeFailure

    try:
        result = runtime.invoke(request)
    except RuntimeFailure as error:
        return {"ok": False, "kind": error.kind, "error": " ".join(str(error).split())}
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

