"""What a daemon does where bwrap cannot confine (here: a ``bwrap`` first
on PATH that fails as one does where the kernel refuses user namespaces):
``auto`` runs the task unconfined and says so in the record, ``task show``
and ``enact status``; ``required`` does not run it, saying why in one line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from codex_home import FAKE_KEY_VARIABLE, scratch_codex_home
from model_server import ModelServer, Reply
from task_repos import make_repo

from conftest import Daemon, DaemonFactory, real_cli, wait_for

REFUSAL = ("bwrap: No permissions to create new namespace, likely because the kernel does not allow "
           "non-privileged user namespaces.")


def broken_bwrap(directory: Path) -> str:
    """A PATH whose first ``bwrap`` fails at start as a real one does."""
    directory.mkdir()
    (directory / "bwrap").write_text(f"#!/bin/sh\necho '{REFUSAL}' >&2\nexit 1\n")
    (directory / "bwrap").chmod(0o755)
    return f"{directory}:{os.environ['PATH']}"


def start(daemons: DaemonFactory, tmp_path: Path, mode: str, marker: Path) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text('[[rule]]\npurpose = "task"\n'
                                        f'match = "mark"\nrun = ["sh", "-c", "touch {marker}; '
                                        f"echo '# x' >> lib.py\"]\nreply = \"marked\"\n")
    return daemons.start(home, env={"ENACT_TASKS_CONFINEMENT": mode, "PATH": broken_bwrap(tmp_path / "bin")})


def run_task(daemon: Daemon, repo: Path) -> dict[str, Any]:
    task_id = daemon.cli_json("task", "add", "--repo", str(repo), "--json", "--repairs", "0", "mark it")["id"]
    wait_for(lambda: daemon.task_state(int(task_id)) in ("succeeded", "failed"),
             what="the task to end")
    shown: dict[str, Any] = daemon.cli_json("task", "show", str(task_id), "--json")
    return shown


def test_where_bwrap_cannot_confine_an_auto_task_runs_unconfined_and_record_show_and_status_say_so(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    daemon = start(daemons, tmp_path, "auto", marker)
    shown = run_task(daemon, make_repo(tmp_path / "repo"))
    assert shown["state"] == "succeeded" and marker.exists(), shown["summary"]
    assert shown["confined"] is False
    text = daemon.cli("task", "show", str(shown["id"])).stdout
    [line] = [line for line in text.splitlines() if line.startswith("confined")]
    assert line == f"confined  no (not confined: bwrap cannot confine here: {REFUSAL})", line
    status = daemon.cli("status").stdout
    assert f"confinement  auto: tasks run UNCONFINED: bwrap cannot confine here: {REFUSAL}" in status, status


def test_required_confinement_does_not_run_a_task_it_cannot_confine_and_says_why_in_one_line(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    daemon = start(daemons, tmp_path, "required", marker)
    shown = run_task(daemon, make_repo(tmp_path / "repo"))
    assert shown["state"] == "failed" and not marker.exists(), shown
    assert shown["summary"] == f"not run: tasks.confinement is required and bwrap cannot confine here: {REFUSAL}"
    assert shown["confined"] is False and shown["failure_class"] == "permanent"
    assert not (daemon.home / "worktrees" / f"task-{shown['id']}").exists()
    status = daemon.cli("status").stdout
    assert f"confinement  required: tasks do not run: bwrap cannot confine here: {REFUSAL}" in status, status


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_status_says_tasks_run_confined_where_bwrap_can(daemons: DaemonFactory) -> None:
    daemon = daemons.start(env={"ENACT_TASKS_CONFINEMENT": "required"})
    assert daemon.cli_json("status", "--json")["confinement"].startswith("required: tasks run confined (bwrap")


def test_required_confinement_refuses_a_conversation_call_of_codex_it_cannot_confine(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    binary = real_cli("codex")
    with ModelServer() as server, scratch_codex_home(server.url) as codex_home:
        server.script(Reply("should not be asked"))
        daemon = daemons.start(env={"CODEX_HOME": str(codex_home), FAKE_KEY_VARIABLE: "x",
                                    "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary,
                                    "ENACT_TASKS_CONFINEMENT": "required", "PATH": broken_bwrap(tmp_path / "bin")})
        sent = daemon.cli("send", "--json", "hello", timeout=120)
        assert server.model_requests() == []
    reply = json.loads(sent.stdout)["reply"]
    assert f"not run: tasks.confinement is required and bwrap cannot confine here: {REFUSAL}" in reply, reply
    assert "make bwrap able to confine here" in reply and "install Codex" not in reply
    assert f"not run: tasks.confinement is required and bwrap cannot confine here: {REFUSAL}" in daemon.log_text()
