"""A hostile task against its sandbox, through a real daemon, as root and as
an unprivileged user: the scripted runtime's ``run`` rule and the doctor
both run ``confine_probe.py`` inside the task (real bwrap, real git), and
every probe must fail the same way whatever uid the daemon has."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from scratch_homes import scratch_dir
from task_repos import make_repo
from unprivileged import WHO, Place, place_for

from conftest import Daemon, DaemonFactory, wait_for

PROBE = Path(__file__).with_name("confine_probe.py")
PYTHON = "/usr/bin/python3"
"""The probes need only the standard library and a python any user can run."""
SECRET = "the vault code is 73-19-44"
LEAKED_ENV = {"OPENAI_API_KEY": "sk-probe-leak", "ANTHROPIC_API_KEY": "sk-ant-probe-leak",
              "GITHUB_TOKEN": "ghp_probeleak", "AWS_SECRET_ACCESS_KEY": "aws-probe-leak"}


def start_probing(daemons: DaemonFactory, place: Place) -> tuple[Daemon, Path, Path]:
    outside = place.base / "outside"
    outside.mkdir()
    settings = {"home": str(place.home), "repo": str(place.base / "repo"), "outside": str(outside),
                "secret": SECRET}
    repo = make_repo(place.base / "repo", doctor=f"{PYTHON} confine_probe.py doctor probe.json; exit 1",
                     files={"confine_probe.py": PROBE.read_text(), "probe.json": json.dumps(settings)})
    (place.home / "scripted.toml").write_text(
        f'[[rule]]\npurpose = "task"\nmatch = "probe"\nrun = ["{PYTHON}", "confine_probe.py", "task", "probe.json"]\n'
        'reply = "probed"\n')
    daemon = place.start(daemons, {"ENACT_TASKS_CONFINEMENT": "required", **LEAKED_ENV})
    remembered = daemon.cli("memory", "remember", "--sensitivity", "secret", SECRET)
    assert remembered.returncode == 0, remembered.stderr
    return daemon, repo, outside


def run_probes(daemon: Daemon) -> dict[str, Any]:
    added = daemon.cli("task", "add", "--repo", str(Path(daemon.home).parent / "repo"), "--repairs", "0", "--json",
                       "probe the sandbox")
    assert added.returncode == 0, added.stderr
    task_id = json.loads(added.stdout)["id"]

    def shown() -> dict[str, Any]:
        result = daemon.cli("task", "show", str(task_id), "--json")
        assert result.returncode == 0, result.stderr
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    wait_for(lambda: shown()["state"] in ("succeeded", "failed", "cancelled"), timeout=90, what="the probe task")
    return shown()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
@pytest.mark.parametrize("who", WHO)
def test_a_hostile_task_gets_through_none_of_its_probes_as_root_or_unprivileged(
        daemons: DaemonFactory, who: str) -> None:
    # Outside /tmp, as a real owner's home and repositories are: a confined
    # task's /tmp is a private one, so a probe of a path there proves nothing.
    with scratch_dir("probe-") as scratch, place_for(who, daemons, scratch, home_in_base=True) as place:
        daemon, repo, outside = start_probing(daemons, place)
        task = run_probes(daemon)
        assert task["confined"] is True, (task, daemon.log_text())
        worktree = Path(task["worktree"])
        reports = {run: json.loads((worktree / f"report-{run}.json").read_text()) for run in ("task", "doctor")}
        table = [f"{who:<13} {run:<7} {'ESCAPED' if item['escaped'] else 'refused':<8} {item['probe']:<36} "
                 f"{item['detail'][:90]}" for run, report in reports.items() for item in report]
        print("\n" + "\n".join(table))
        assert not [line for line in table if "ESCAPED" in line], "\n".join(table)
        assert len(reports["task"]) == len(reports["doctor"]) == 14
        assert not list(outside.iterdir()) and not (repo / "escaped-task").exists()
        assert not (repo / ".git" / "hooks" / "post-checkout").exists()
        assert daemon.process.poll() is None and os.path.exists(daemon.home / "state" / "data.mdb")
