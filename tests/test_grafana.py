"""The Grafana dashboard (``deploy/grafana/enact.json``) and its provisioning
files: a dashboard model Grafana can load, as far as a test can tell without
Grafana, and every panel's query, evaluated by a real Prometheus scraping a
real daemon that did some work (chat turns, memory recall, tasks, an evidence
scan; the scripted runtime, its rules reporting tokens, under a budget),
returns data."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml
from prometheus_server import get, query, running_prometheus
from task_repos import make_repo

from enact.messages.local import Send

from conftest import Daemon, DaemonFactory, wait_for

REPO = Path(__file__).resolve().parent.parent
GRAFANA = REPO / "deploy" / "grafana"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
"""Every panel's and target's: the dashboard's data source variable."""
PANEL_TYPES = frozenset({"timeseries", "stat", "bargauge", "gauge", "table"})
GRID_COLUMNS = 24

RATE_INTERVAL = "5s"
"""What Grafana makes of ``$__rate_interval`` over a short range with a 1 s
scrape interval (at least four scrapes)."""
QUIET = {
    "Chat event failures": "no event fails here",
    "Actor restarts": "no actor fails here",
    "Runtime calls not ok": "every model call succeeds here",
}
"""Panels whose series are all 0 after this work (each still returns its
series: every known label combination is exported from the start). Every
other panel must show the work: some sample that is a number other than 0."""


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads((GRAFANA / "enact.json").read_bytes())
    return loaded


def panels() -> list[dict[str, Any]]:
    """The panels that query (rows only group them)."""
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def _overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    across = a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
    return across and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_the_dashboard_is_a_grafana_dashboard_model() -> None:
    model = dashboard()
    assert model["uid"] == "enact-daemon" and model["title"] == "enact"
    assert isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    variables = {variable["name"]: variable for variable in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["datasource"] == DATASOURCE
    every = model["panels"]
    ids = [panel["id"] for panel in every]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids)), f"panel ids not unique: {ids}"
    for panel in every:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["y"] >= 0 and grid["w"] >= 1 and grid["h"] >= 1, panel["title"]
        assert grid["x"] + grid["w"] <= GRID_COLUMNS, f"{panel['title']} is wider than the grid: {grid}"
    for i, a in enumerate(every):
        for b in every[i + 1:]:
            assert not _overlap(a["gridPos"], b["gridPos"]), f"{a['title']} and {b['title']} overlap"
    known = {f"${name}" for name in variables} | {"$__rate_interval", "$__range"}
    for panel in panels():
        title = panel["title"]
        assert panel["type"] in PANEL_TYPES, f"{title}: type {panel['type']}"
        assert panel["datasource"] == DATASOURCE, title
        assert title and panel["description"], f"panel {panel['id']} has no title or description"
        targets = panel["targets"]
        assert targets, f"{title} has no query"
        assert len({target["refId"] for target in targets}) == len(targets), f"{title}: refIds repeat"
        for target in targets:
            assert target["datasource"] == DATASOURCE, title
            assert target["expr"].strip(), title
            used = set(re.findall(r"\$\w+", target["expr"]))
            assert used <= known, f"{title} uses undefined variables {sorted(used - known)}"
    assert set(QUIET) <= {panel["title"] for panel in panels()}, "a quiet panel was renamed: update QUIET"


def test_the_provisioning_files_load_the_dashboard_and_a_prometheus_datasource() -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "enact.yml").read_text())
    assert datasources["apiVersion"] == 1
    [source] = datasources["datasources"]
    assert source["type"] == "prometheus" and source["access"] == "proxy"
    assert source["url"].startswith("http://") and source["isDefault"] is True
    scrape = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert source["jsonData"]["timeInterval"] == scrape["global"]["scrape_interval"]
    dashboards = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "enact.yml").read_text())
    assert dashboards["apiVersion"] == 1
    [provider] = dashboards["providers"]
    assert provider["type"] == "file" and Path(provider["options"]["path"]).is_absolute()


# -- every panel against a real Prometheus ---------------------------------------

GATE_RULES = """
[[rule]]
match = "."
reply = "noted"
input_tokens = 300
output_tokens = 20

[[rule]]
purpose = "task"
match = "wait for the gate"
run = ["sh", "-c", "until [ -e '{gate}' ]; do sleep 0.05; done"]
reply = "the gate opened; nothing to change"
input_tokens = 1200
output_tokens = 80

[[rule]]
purpose = "scan"
match = "enact evidence scan: feedback"
reply = '''{observations}'''
input_tokens = 900
output_tokens = 60
"""
"""Chat answered, a task's model call that waits for the test to open a gate
(so a second task is seen queued behind it), and a scan that finds one
signal; each call reports the tokens it spent."""
BUDGET = {"ENACT_BUDGET_DAILY_TOKENS_TOTAL": "1000000", "ENACT_BUDGET_DAILY_TOKENS_TASK": "500000"}
"""Budgets the work stays well within: the budget panel shows what is left of each."""


def _observations() -> str:
    return orjson.dumps([{
        "observation": "The owner says the replies are far too long.", "evidence_type": "complaint",
        "affected_area": "replies", "desired_outcome": "short replies", "confidence": 0.9, "explicit": True,
        "evidence_refs": ["turn:1"],
    }]).decode()


def _until_prometheus_has(api: str, promql: str, timeout: float = 30) -> None:
    """Until the filtering expression ``promql`` selects something."""
    wait_for(lambda: query(api, promql), timeout=timeout, what=f"Prometheus to have {promql}")


def _task_state(daemon: Daemon, task_id: int) -> str:
    state: str = daemon.cli_json("task", "show", str(task_id), "--json")["state"]
    return state


def _work(daemon: Daemon, api: str, repo: Path, gate: Path) -> None:
    """What the dashboard shows: chat turns, a fact and a recall, two tasks
    (one queued behind the other), an evidence scan."""
    assert daemon.cli("memory", "remember", "the owner's editor is vim").returncode == 0
    for text in ("your replies are far too long", "which editor do I use?"):
        daemon.request(Send(text=text))
    assert daemon.cli("memory", "context", "--query", "editor").returncode == 0

    add = ("task", "add", "--repo", str(repo), "--json")
    first = int(daemon.cli_json(*add, "wait for the gate, then stop")["id"])
    wait_for(lambda: _task_state(daemon, first) == "running", timeout=30, what="the first task to run")
    second = int(daemon.cli_json(*add, "wait for the gate again")["id"])
    _until_prometheus_has(api, 'enact_tasks{state="queued"} == 1 and on() enact_tasks{state="running"} == 1')
    gate.touch()
    for task_id in (first, second):
        wait_for(lambda task_id=task_id: _task_state(daemon, task_id) not in ("queued", "running"), timeout=60,
                 what=f"task {task_id} to end")
        assert _task_state(daemon, task_id) == "succeeded", daemon.cli("task", "show", str(task_id)).stdout

    scanned = daemon.cli_json("evolve", "scan", "--source", "feedback", "--json")["scans"]
    assert [scan["outcome"] for scan in scanned] == ["completed"], scanned
    # The last scrape came after all of it.
    _until_prometheus_has(api, 'sum(enact_task_events_total{event="succeeded"}) == 2 and on() '
                               'sum(enact_evolution_scans_total{outcome="completed"}) >= 1')
    assert not query(api, "enact_tasks != 0"), "the ended tasks are still counted as queued or running"
    assert [series["value"][1] for series in query(api, "enact_task_workers")] == ["1"]


def _expr(target: dict[str, Any], *, instance: str, range_s: int) -> str:
    """The target's query as Grafana sends it: its variables substituted
    (a selected instance regex-escaped, inside a PromQL string)."""
    escaped = re.escape(instance).replace("\\", "\\\\")
    expr = str(target["expr"]).replace("$__rate_interval", RATE_INTERVAL).replace("$__range", f"{range_s}s")
    expr = expr.replace("$instance", escaped)
    assert "$" not in expr, expr
    return expr


def _evaluate(api: str, target: dict[str, Any], expr: str, start: float, end: float) -> list[list[str]]:
    """The target's series, each as its ``[time, value]`` samples: an instant
    target at ``end``, a range target over the window at a 1 s step."""
    if target.get("instant"):
        result = get(api, "/api/v1/query", query=expr, time=f"{end:.3f}")["result"]
        return [[series["value"]] for series in result]
    result = get(api, "/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step="1")["result"]
    return [series["values"] for series in result]


def _shows_something(series: list[list[list[str]]]) -> bool:
    values = (float(value) for samples in series for _, value in samples)
    return any(math.isfinite(value) and value != 0 for value in values)


def _working_daemon(daemons: DaemonFactory, tmp_path: Path) -> tuple[Daemon, Path, Path]:
    home = daemons.new_home()
    gate = tmp_path / "gate"
    (home / "scripted.toml").write_text(GATE_RULES.format(gate=gate, observations=_observations()))
    daemon = daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": "off", "ENACT_DAEMON_WORKERS": "1", **BUDGET})
    return daemon, make_repo(tmp_path / "repo", doctor="true"), gate


def test_every_panel_returns_data_from_prometheus_scraping_a_daemon_that_worked(
    daemons: DaemonFactory, require_binary: Callable[[str], str], tmp_path: Path
) -> None:
    prometheus = require_binary("prometheus")
    daemon, repo, gate = _working_daemon(daemons, tmp_path)
    instance = daemon.cli_json("status", "--json")["metrics_addr"]
    with running_prometheus(prometheus, instance) as api:
        began = time.time() - 1
        _work(daemon, api, repo, gate)
        # Steps run from the start: ``end`` must be one, or the last step
        # could fall before the scrape that saw the last of the work.
        end = time.time()
        range_s = math.ceil(end - began)
        start = end - range_s
        # The dashboard's instance variable: label_values(enact_build_info, instance).
        assert get(api, "/api/v1/label/instance/values", **{"match[]": "enact_build_info"}) == [instance]
        problems = list(_problems(api, instance=instance, start=start, end=end, range_s=range_s))
    assert not problems, "\n".join(problems)


def _problems(api: str, *, instance: str, start: float, end: float, range_s: int) -> Iterator[str]:
    for panel in panels():
        title = panel["title"]
        found = []
        for target in panel["targets"]:
            expr = _expr(target, instance=instance, range_s=range_s)
            series = _evaluate(api, target, expr, start, end)
            if not series:
                yield f"{title} [{target['refId']}] returned no series: {expr}"
            found.extend(series)
        if title not in QUIET and found and not _shows_something(found):
            yield f"{title}: every sample is 0 or NaN, though the daemon did the work it shows"
