"""The deployment files are valid for the tools that consume them."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from enact import __version__

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


def _unit_service() -> configparser.SectionProxy:
    # systemd allows repeated keys and uses %-specifiers, so no strictness and
    # no interpolation; keep key case as written.
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    # read() silently skips a missing file; make that a failure.
    assert unit.read(SYSTEMD_UNIT, encoding="utf-8") == [str(SYSTEMD_UNIT)]
    return unit["Service"]


def test_systemd_unit_runs_the_daemon() -> None:
    service = _unit_service()
    assert service["ExecStart"].endswith('exec "$enact" daemon run\'')
    assert "%S/enact/releases/current/bin/enact" in service["ExecStart"]  # the release `enact update` made current
    assert service["Restart"] == "on-failure"
    assert service["Type"] == "notify"


def test_make_install_puts_the_program_the_unit_starts_in_place(
    tmp_path: Path, require_binary: Callable[[str], str]
) -> None:
    make = require_binary("make")
    home = tmp_path / "home"
    home.mkdir()
    # HOME is the only way the Makefile and the unit's %h find the user's
    # home, so nothing here touches the real one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENACT_", "MAKE", "XDG_"))}
    env["HOME"] = str(home)
    installed = subprocess.run(
        [make, "--no-print-directory", "install"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # Before any update, the unit starts the program `make install` put in place.
    words = [word.lstrip("'") for word in _unit_service()["ExecStart"].split()]
    program = next(word.removeprefix("enact=").rstrip(";") for word in words if word.startswith("enact=%h/"))
    resolved = Path(program.replace("%h", str(home), 1))
    assert resolved.exists(), f"{resolved} missing after make install"
    version = subprocess.run([str(resolved), "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert __version__ in version.stdout
