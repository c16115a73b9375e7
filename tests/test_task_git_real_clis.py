"""Git inside a confined task run by the real Codex and Claude Code CLIs,
driven by the scripted model servers: the model edits the worktree, then
runs git there (status, add, stash and pop, the branch's name). Each
command works, the branch is the task's real one, and the owner's
repository is as it was (but for the task's branch, which the host makes).

Codex runs its commands in its own sandbox (``workspace-write``, nested in
enact's), which keeps the ``.git`` of each place it may write read-only by
design, and the git directory a ``.git`` file names too (measured,
codex-cli 0.169.0): the task's own git directory is given to it as a place
it may write (``RuntimeRequest.writable``), or ``git add`` and ``stash``
fail there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_home
from model_server import ModelServer, RecordedRequest, Reply, ToolCall
from scratch_homes import scratch_dir
from task_repos import git, make_repo
from test_task_git_safety import owners_view
from test_task_workers_real_clis import ADD_DOUBLE, assert_reviewed_with_the_edit, run_task
from unprivileged import WHO, place_for

from enact.tasks import task_branches

from conftest import Daemon, DaemonFactory, real_cli

GIT_COMMANDS = ("git status", "git add -A", "git stash", "git stash pop", "git branch --show-current")


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


def tool_outputs(request: RecordedRequest) -> list[str]:
    """What the CLI told the model its commands printed, in order: the
    Responses API's ``function_call_output`` items (Codex), the Messages
    API's ``tool_result`` blocks (Claude Code)."""
    body = request.json()
    found = [str(item.get("output", "")) for item in body.get("input", [])
             if isinstance(item, dict) and item.get("type") == "function_call_output"]
    for message in body.get("messages", []):
        for block in message.get("content", []) if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                found.append(content if isinstance(content, str)
                             else "".join(part.get("text", "") for part in content or []))
    return found


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("cli", ["codex", "claude"])
def test_git_works_for_a_real_cli_in_a_confined_task_on_its_real_branch_and_the_owners_repository_is_unchanged(
        daemons: DaemonFactory, server: ModelServer, cli: str, who: str, require_binary: Any) -> None:
    require_binary("bwrap")
    binary = real_cli(cli)
    server.script(ToolCall(ADD_DOUBLE), *(ToolCall(command) for command in GIT_COMMANDS),
                  Reply("I added double() and looked at it with git."))
    # The CLI's home outside /tmp, as a real one is (see scratch_homes).
    with scratch_dir(f"{cli}-git-") as scratch, place_for(who, daemons, scratch) as place:
        repo = make_repo(place.base / "repo", doctor=place.pytest)
        cli_home = place.base / f"{cli}-home"
        if cli == "codex":
            env = {"CODEX_HOME": str(codex_home(cli_home, server.url)), FAKE_KEY_VARIABLE: "fake-key-value",
                   "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary}
        else:
            env = {**claude_env(cli_home, server.url), "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": binary}
        daemon = place.start(daemons, {**env, "ENACT_TASKS_CONFINEMENT": "required"})
        git_by_the_cli(daemon, server, repo)


def git_by_the_cli(daemon: Daemon, server: ModelServer, repo: Path) -> None:
    before = owners_view(repo)  # once the repository is the daemon's user's
    shown = run_task(daemon, repo, "add a double function to lib.py")
    log = daemon.cli("task", "log", str(shown["id"])).stdout
    ran = [line.split("model ran ", 1)[1] for line in log.splitlines() if "model ran `" in line]
    assert len(ran) == 1 + len(GIT_COMMANDS), log
    for command, line in zip(GIT_COMMANDS, ran[1:], strict=True):
        assert command in line and line.endswith("(exit 0)"), log
    assert_reviewed_with_the_edit(daemon, repo, shown)
    assert shown["confined"] is True
    branch = task_branches.branch_of(daemon.home, shown["id"])
    assert tool_outputs(server.model_requests()[-1])[-1].strip().endswith(branch), log
    assert owners_view(repo, but=branch) == before
    assert git(repo, "rev-parse", f"{branch}~1") == before["head"]  # one commit: the host's capture
    daemon.terminate()
