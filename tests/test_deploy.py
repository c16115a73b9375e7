"""The deployment files are valid for the tools that consume them."""

from __future__ import annotations

import configparser
import subprocess
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS = REPO / "deploy" / "prometheus"
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
