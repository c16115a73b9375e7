"""The deployment files are valid for the tools that consume them."""

from __future__ import annotations

import configparser
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS = REPO / "deploy" / "prometheus"
ALERT_TESTS = PROMETHEUS / "tests"
SYSTEMD_UNIT = REPO / "deploy" / "systemd" / "enact.service"


def _promtool(promtool: str, *args: str) -> None:
    result = subprocess.run(
        [promtool, *args],
        cwd=PROMETHEUS,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, (
        f"promtool {' '.join(args)} exited {result.returncode}\n"
        f"{result.stdout}{result.stderr}"
    )


def test_alert_rules_pass_promtool(require_binary: Callable[[str], str]) -> None:
    promtool = require_binary("promtool")
    _promtool(promtool, "check", "rules", str(PROMETHEUS / "alerts.yml"))


def test_every_alert_has_a_rule_unit_test() -> None:
    alerts = set(re.findall(r"^\s*- alert: (\w+)$", (PROMETHEUS / "alerts.yml").read_text(), re.MULTILINE))
    tested = {
        name
        for path in ALERT_TESTS.glob("*.yml")
        for name in re.findall(r"^\s*alertname: (\w+)$", path.read_text(), re.MULTILINE)
    }
    assert alerts, "no alerts found in alerts.yml"
    assert alerts <= tested, f"alerts without a promtool unit test: {sorted(alerts - tested)}"


def test_alerts_fire_on_the_first_incident_and_stay_quiet_otherwise(
    require_binary: Callable[[str], str],
) -> None:
    promtool = require_binary("promtool")
    files = sorted(str(path) for path in ALERT_TESTS.glob("*.yml"))
    assert files
    _promtool(promtool, "test", "rules", *files)


def test_prometheus_config_passes_promtool(
    require_binary: Callable[[str], str],
) -> None:
    promtool = require_binary("promtool")
    _promtool(promtool, "check", "config", str(PROMETHEUS / "prometheus.yml"))


def test_systemd_unit_runs_the_daemon() -> None:
    # systemd allows repeated keys and uses %-specifiers, so no strictness and
    # no interpolation; keep key case as written.
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    # read() silently skips a missing file; make that a failure.
    assert unit.read(SYSTEMD_UNIT, encoding="utf-8") == [str(SYSTEMD_UNIT)]

    service = unit["Service"]
    assert service["ExecStart"].endswith("enact daemon run")
    assert service["Restart"] == "on-failure"
    assert service["Type"] == "notify"
