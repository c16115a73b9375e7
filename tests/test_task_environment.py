"""The environment of a task's commands and its doctor, through a daemon
whose own environment holds its owner's secrets: an allow-list (PATH,
locale, the private HOME and TMPDIR) and what ``tasks.env_passthrough``
names; nothing else, confined or not."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_home
from model_server import ModelServer, Reply, ToolCall
from scratch_homes import scratch_dir
from task_repos import make_repo
from unprivileged import place_for

from conftest import Daemon, DaemonFactory, real_cli, wait_for

SECRETS = {"OPENAI_API_KEY": "sk-env-leak", "ANTHROPIC_API_KEY": "sk-ant-env-leak",
           "AWS_SECRET_ACCESS_KEY": "aws-env-leak", "GITHUB_TOKEN": "ghp_env_leak"}


def environment(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.mark.parametrize(("confinement", "who"), [("auto", "root"), ("off", "root"), ("auto", "unprivileged")])
def test_task_commands_and_the_doctor_see_only_the_allow_list_and_what_the_owner_passes_through(
        daemons: DaemonFactory, tmp_path: Path, confinement: str, who: str) -> None:
    if confinement == "auto" and shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed")
    with place_for(who, daemons, tmp_path) as place:
        repo = make_repo(place.base / "repo", doctor="env > env-doctor.txt; exit 1")
        (place.home / "scripted.toml").write_text(
            '[[rule]]\npurpose = "task"\nmatch = "print"\n'
            'run = ["sh", "-c", "env > env-task.txt"]\nreply = "printed"\n')
        daemon = place.start(daemons, {**SECRETS, "PROJECT_MODE": "wanted", "LC_TIME": "C",
                                       "ENACT_TASKS_CONFINEMENT": confinement,
                                       "ENACT_TASKS_ENV_PASSTHROUGH": "PROJECT_*,GITHUB_TOKEN"})
        seen_by_the_task_and_its_doctor(daemon, repo, confined=confinement == "auto")


def seen_by_the_task_and_its_doctor(daemon: Daemon, repo: Path, *, confined: bool) -> None:
    task_id = daemon.cli_json("task", "add", "--repo", str(repo), "--json", "--repairs", "0", "print the env")["id"]

    def shown() -> dict[str, Any]:
        found: dict[str, Any] = daemon.cli_json("task", "show", str(task_id), "--json")
        return found

    wait_for(lambda: shown()["state"] == "failed", what="the task to fail its doctor")
    assert shown()["confined"] is confined
    worktree = Path(shown()["worktree"])
    for seen_by in ("task", "doctor"):
        seen = environment((worktree / f"env-{seen_by}.txt").read_text())
        assert not [name for name in seen if name.startswith("ENACT_") or (name in SECRETS and name != "GITHUB_TOKEN")]
        assert seen["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"] and seen["PROJECT_MODE"] == "wanted", seen_by
        assert seen["LC_TIME"] == "C" and seen["PATH"]
        assert seen["HOME"] != str(Path.home()) and seen["HOME"].endswith("/tmp/home"), seen
        assert seen["TMPDIR"].endswith("tmp")


@pytest.mark.parametrize("cli", ["codex", "claude"])
def test_a_real_clis_task_commands_see_neither_the_daemons_secrets_nor_its_settings(
        daemons: DaemonFactory, tmp_path: Path, cli: str) -> None:
    """What the model's shell command printed (sent back to the model): no
    secret of the daemon's environment, no ENACT_*; Codex keeps its own key
    from it too. Claude Code's commands see its ANTHROPIC_* (docs/tasks.md)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed")
    binary = real_cli(cli)
    repo = make_repo(tmp_path / "repo")
    with ModelServer() as server, scratch_dir(f"{cli}-home-") as owner_home:
        server.script(ToolCall("env | sort"), Reply("nothing to change"))
        if cli == "codex":
            codex_home(owner_home, server.url)
            env = {"CODEX_HOME": str(owner_home), FAKE_KEY_VARIABLE: "fake-key-value",
                   "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary}
        else:
            env = {**claude_env(owner_home, server.url), "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": binary}
        # Claude Code's own key is the one claude_env gives it, which its
        # commands see (docs/tasks.md); every other secret must stay out.
        daemon = daemons.start(env={**SECRETS, **env, "ENACT_TASKS_CONFINEMENT": "required"})
        task_id = daemon.cli_json("task", "add", "--repo", str(repo), "--json", "print the env")["id"]
        wait_for(lambda: daemon.task_state(int(task_id)) == "succeeded",
                 timeout=120, what="the task to succeed with no changes")
        told = "\n".join(request.body.decode(errors="replace") for request in server.model_requests()[1:])
    assert "PATH=" in told and "TMPDIR=/tmp" in told, told  # the command ran, confined
    assert not [value for value in SECRETS.values() if value in told]
    assert "ENACT_" not in told and "fake-key-value" not in told
