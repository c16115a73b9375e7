"""A task run by the real Codex CLI, driven by the scripted model server:
Codex edits the worktree with its exec_command tool, the doctor validates,
a review is opened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, ToolCall
from task_repos import git, make_repo

from conftest import DaemonFactory, real_cli, wait_for


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


@pytest.mark.parametrize("confinement", ["off", "auto"])
def test_the_real_codex_cli_edits_the_worktree_and_the_task_is_reviewed(daemons: DaemonFactory,
                                                                        server: ModelServer, tmp_path: Path,
                                                                        confinement: str, require_binary: Any) -> None:
    binary = real_cli("codex")
    if confinement == "auto":
        require_binary("bwrap")
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall("printf '\\n\\ndef double(x):\\n    return 2 * x\\n' >> lib.py"),
                  Reply("I added double() to lib.py."))
    with scratch_codex_home(server.url) as codex_home:
        env = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
        env.update({"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary,
                    "ENACT_TASKS_CONFINEMENT": confinement})
        daemon = daemons.start(env=env)
        added = daemon.cli_json("task", "add", "--repo", str(repo), "--json", "add a double function to lib.py")
        task_id = added["id"]

        def ended() -> bool:
            state: str = daemon.cli_json("task", "show", str(task_id), "--json")["state"]
            return state in ("succeeded", "failed", "cancelled", "paused")

        wait_for(ended, timeout=120, what="the codex task to end")
        shown = daemon.cli_json("task", "show", str(task_id), "--json")
        assert shown["state"] == "succeeded", shown
        assert shown["confined"] is (confinement == "auto")
        first = orjson.dumps(server.model_requests()[0].json()["input"]).decode()
        assert "add a double function to lib.py" in first and "Validation" in first
        assert "def double(x)" in git(repo, "show", f"enact/task-{task_id}:lib.py")
        [review] = daemon.cli_json("review", "list", "--json")
        assert review["task_id"] == task_id
        assert "exec_command" in daemon.cli("task", "log", str(task_id)).stdout or \
            "double" in daemon.cli("task", "log", str(task_id)).stdout
        daemon.terminate()
