"""What a task's runtime ran, and a runtime that could run nothing: the
real Codex and Claude Code CLIs against the scripted model server. Each
command the model ran is in the task log with its exit status; a task with
no change whose every command failed fails with their reason instead of
"succeeded: no changes"; Codex with its home under the temporary directory
(where it will not set up its sandbox helper by itself) still runs them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_env, codex_home, scratch_codex_home
from model_server import ModelServer, Reply, ToolCall
from scratch_homes import scratch_dir
from task_repos import make_repo
from test_task_workers_real_clis import ADD_DOUBLE, assert_reviewed_with_the_edit, run_task

from conftest import Daemon, DaemonFactory, real_cli, run_cli


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


def codex_vars(home: Path, confinement: str = "off") -> dict[str, str]:
    env = {k: v for k, v in codex_env(home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
    return {**env, "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex"),
            "ENACT_TASKS_CONFINEMENT": confinement}


def task_log(daemon: Daemon, shown: dict[str, Any]) -> str:
    return daemon.cli("task", "log", str(shown["id"])).stdout


@pytest.mark.parametrize("confinement", ["off", "auto"])
def test_codex_with_its_home_under_the_temporary_directory_runs_the_tasks_commands(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path, confinement: str, require_binary: Any) -> None:
    if confinement == "auto":
        require_binary("bwrap")
    home = codex_home(tmp_path / "codex-home", server.url)  # pytest's tmp_path is under /tmp
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall(ADD_DOUBLE), Reply("I added double() to lib.py."))
    daemon = daemons.start(env=codex_vars(home, confinement))
    shown = run_task(daemon, repo, "add a double function to lib.py")
    assert_reviewed_with_the_edit(daemon, repo, shown)
    assert shown["confined"] is (confinement == "auto")
    log = task_log(daemon, shown)
    assert re.search(r"model ran `(/usr)?/bin/bash -lc", log) and "def double(x)" in log and "(exit 0)" in log, log
    assert "could not create PATH aliases" not in log and "codex-linux-sandbox" not in log
    daemon.terminate()


def test_codex_runtime_check_notes_a_home_under_the_temporary_directory(daemons: DaemonFactory,
                                                                        server: ModelServer, tmp_path: Path) -> None:
    home = codex_home(tmp_path / "codex-home", server.url)
    result = run_cli(daemons.new_home(), "runtime", "check", env=codex_vars(home))
    assert result.returncode == 0, result
    assert "CODEX_HOME is under the temporary directory" in result.stdout


FAILING = "ls no-such-file"


def assert_failed_with_the_commands_reason(daemon: Daemon, shown: dict[str, Any], runtime: str) -> None:
    assert shown["state"] == "failed", (shown, daemon.log_text())
    summary = shown["events"][-1]["summary"]
    assert summary.startswith(f"no changes, and every command the {runtime} runtime ran failed (1): "), summary
    assert FAILING in summary and "(exit 2)" in summary and "No such file or directory" in summary
    assert "model ran `" in task_log(daemon, shown) and "(exit 2)" in task_log(daemon, shown)


def test_a_codex_task_whose_commands_all_failed_without_a_change_fails_with_their_reason(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall(FAILING), Reply("There is nothing to change."))
    with scratch_codex_home(server.url) as home:
        daemon = daemons.start(env=codex_vars(home))
        shown = run_task(daemon, repo, "look for the file and fix it")
        assert_failed_with_the_commands_reason(daemon, shown, "codex")
        daemon.terminate()


@pytest.mark.parametrize("confinement", ["off", "auto"])
def test_a_claude_task_whose_commands_all_failed_without_a_change_fails_with_their_reason(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path, confinement: str, require_binary: Any) -> None:
    if confinement == "auto":
        require_binary("bwrap")
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall(FAILING), Reply("There is nothing to change."))
    daemon = daemons.start(env={**claude_env(tmp_path / "claude-home", server.url), "ENACT_RUNTIME_ADAPTER": "claude",
                                "ENACT_CLAUDE_BIN": real_cli("claude"), "ENACT_TASKS_CONFINEMENT": confinement})
    shown = run_task(daemon, repo, "look for the file and fix it")
    assert_failed_with_the_commands_reason(daemon, shown, "claude")
    assert shown["confined"] is (confinement == "auto")
    daemon.terminate()


def test_a_claude_task_logs_each_command_with_its_exit_status_and_one_that_worked_means_no_changes_succeeds(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall("ls lib.py"), ToolCall(FAILING), Reply("Nothing needs changing."))
    with scratch_dir("claude-home-") as owner_home:
        daemon = daemons.start(env={**claude_env(owner_home, server.url), "ENACT_RUNTIME_ADAPTER": "claude",
                                    "ENACT_CLAUDE_BIN": real_cli("claude"), "ENACT_TASKS_CONFINEMENT": "off"})
        shown = run_task(daemon, repo, "check whether lib.py needs a change")
        assert (shown["state"], shown["summary"]) == ("succeeded", "no changes"), shown
        log = task_log(daemon, shown)
        assert "model ran `ls lib.py` (exit 0)" in log
        assert f"model ran `{FAILING}` (exit 2): ls: cannot access 'no-such-file': No such file or directory" in log
        daemon.terminate()


def test_a_scripted_task_whose_command_failed_without_a_change_fails_with_its_reason(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    from test_task_workers import start, task_rules

    repo = make_repo(tmp_path / "repo")
    daemon = start(daemons, task_rules('match = "look"\nrun = ["sh", "-c", "echo cannot start >&2; exit 3"]\n'
                                  'reply = "nothing to do"'))
    shown = run_task(daemon, repo, "look around")
    assert shown["state"] == "failed", shown
    assert shown["events"][-1]["summary"] == ("no changes, and every command the scripted runtime ran failed (1): "
                                              "`sh -c 'echo cannot start >&2; exit 3'` (exit 3): cannot start")
    assert "model ran `sh -c 'echo cannot start >&2; exit 3'` (exit 3): cannot start" in task_log(daemon, shown)
    assert not (daemon.home / "worktrees" / f"task-{shown['id']}").exists()
