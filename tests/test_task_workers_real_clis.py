"""A task run by the real Codex and Claude Code CLIs, driven by the scripted
model server: the CLI edits the worktree with its shell tool, the doctor
validates, a review is opened. Confined, the CLI's shell writes nowhere but
the worktree and the task's private state directory of the CLI: the owner's
(what steers the CLI's later unconfined calls, the sessions) stays as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import orjson
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, ToolCall
from scratch_homes import scratch_dir, snapshot
from task_repos import git, make_repo, pytest_doctor

from enact.tasks import task_branches

from conftest import Daemon, DaemonFactory, real_cli, wait_for

ADD_DOUBLE = "printf '\\n\\ndef double(x):\\n    return 2 * x\\n' >> lib.py"
"""The model's edit, run by the CLI's shell tool in the worktree."""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


def run_task(daemon: Daemon, repo: Path, text: str) -> dict[str, Any]:
    """Queue the task, wait for it to end, and return ``task show``."""
    task_id = daemon.cli_json("task", "add", "--repo", str(repo), "--json", text)["id"]

    wait_for(lambda: daemon.task_state(int(task_id)) in ("succeeded", "failed", "cancelled", "paused"), timeout=120,
             what="the task to end")
    shown: dict[str, Any] = daemon.cli_json("task", "show", str(task_id), "--json")
    return shown


def assert_reviewed_with_the_edit(daemon: Daemon, repo: Path, shown: dict[str, Any]) -> None:
    assert shown["state"] == "succeeded", (shown["summary"], daemon.cli("task", "log", str(shown["id"])).stdout)
    assert "def double(x)" in git(repo, "show", f"{task_branches.branch_of(daemon.home, shown['id'])}:lib.py")
    [review] = daemon.cli_json("review", "list", "--json")
    assert review["task_id"] == shown["id"]


@pytest.mark.parametrize("confinement", ["off", "auto"])
def test_the_real_codex_cli_edits_the_worktree_and_the_task_is_reviewed(daemons: DaemonFactory,
                                                                        server: ModelServer, tmp_path: Path,
                                                                        confinement: str, require_binary: Any) -> None:
    binary = real_cli("codex")
    if confinement == "auto":
        require_binary("bwrap")
    repo = make_repo(tmp_path / "repo")
    server.script(ToolCall(ADD_DOUBLE), Reply("I added double() to lib.py."))
    with scratch_codex_home(server.url) as codex_home:
        env = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
        env.update({"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary,
                    "ENACT_TASKS_CONFINEMENT": confinement})
        daemon = daemons.start(env=env)
        shown = run_task(daemon, repo, "add a double function to lib.py")
        assert_reviewed_with_the_edit(daemon, repo, shown)
        assert shown["confined"] is (confinement == "auto")
        first = orjson.dumps(server.model_requests()[0].json()["input"]).decode()
        assert "add a double function to lib.py" in first and "Validation" in first
        log = daemon.cli("task", "log", str(shown["id"])).stdout
        assert "exec_command" in log or "double" in log
        daemon.terminate()


def test_the_real_claude_cli_confined_edits_the_worktree_but_writes_nothing_outside_it(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path, require_binary: Any) -> None:
    binary = real_cli("claude")
    require_binary("bwrap")
    repo = make_repo(tmp_path / "repo")
    enact_home = daemons.new_home()
    # The owner's home lies outside /tmp, as a real one does (inside, the
    # task's private /tmp would take a write there and the test prove nothing).
    with scratch_dir("claude-home-") as owner_home:
        escapes = (owner_home / "escaped.txt", enact_home / "escaped.txt")
        server.script(ToolCall(f"{ADD_DOUBLE}; " + "; ".join(f"printf escaped > {path}" for path in escapes)),
                      Reply("I added double() to lib.py."))
        daemon = daemons.start(enact_home, env={
            **claude_env(owner_home, server.url), "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": binary,
            "ENACT_TASKS_CONFINEMENT": "auto"})
        shown = run_task(daemon, repo, "add a double function to lib.py")
        assert_reviewed_with_the_edit(daemon, repo, shown)
        assert shown["confined"] is True
        assert not any(path.exists() for path in escapes)
        # The writes were tried and refused, and the model was told so.
        assert server.model_requests()[1].body.decode().count("Read-only file system") >= len(escapes)
        # Its session was kept in the task's private directory, not the owner's.
        assert not list((owner_home / ".claude").rglob("*.jsonl"))
        daemon.terminate()


def try_to_rewrite(config_dir: Path, names: tuple[str, ...], transcripts: str) -> str:
    """The model's shell command: the edit, then a write to each of ``names``
    in the CLI's config directory, each on its own (one refusal does not skip
    the next), then printing the owner's session ``transcripts`` (a glob
    there), through Python: Claude Code itself refuses a shell redirect
    into its config directory, but cannot see into a program that writes."""
    writes = "; ".join(f"python3 -c \"open('{config_dir / name}', 'a').write('steered')\"" for name in names)
    reads = (f"python3 -c \"import glob; print('transcripts:', "
             f"[open(p).read() for p in glob.glob('{config_dir / transcripts}', recursive=True)])\"")
    return f"{ADD_DOUBLE}; {writes}; {reads}"


OWNERS_CHAT = "the owner's private chat about the garden"


def owners_earlier_session(server: ModelServer, argv: list[str], env: dict[str, str], cwd: Path) -> None:
    """One unconfined call, as the owner's chat makes: the CLI's home then
    holds its transcript, databases and ids, which a confined task finds."""
    server.script(Reply("noted"))
    subprocess.run(argv, input=OWNERS_CHAT, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                   check=True)


def assert_unseen_by_the_task(server: ModelServer) -> None:
    """What the task's model was sent (after the owner's own call) holds
    nothing of the owner's transcript, but the task did try to read it."""
    task_requests = [request.body.decode() for request in server.model_requests()[1:]]
    assert any("transcripts:" in body for body in task_requests)
    assert not any(OWNERS_CHAT in body for body in task_requests)


def test_a_confined_claude_task_cannot_rewrite_the_config_that_steers_later_claude_calls(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path, require_binary: Any) -> None:
    binary = real_cli("claude")
    require_binary("bwrap")
    repo = make_repo(tmp_path / "repo")
    with scratch_dir("claude-home-") as owner_home:
        config = owner_home / ".claude"
        config.mkdir()
        (config / "settings.json").write_text('{"env": {}}')  # the owner's; CLAUDE.md does not exist yet
        env = claude_env(owner_home, server.url)
        owners_earlier_session(server, [binary, "-p", "--output-format", "json"], {**os.environ, **env}, tmp_path)
        owners = snapshot(config)
        assert list((config / "projects").rglob("*.jsonl"))
        server.script(ToolCall(try_to_rewrite(config, ("settings.json", "CLAUDE.md"), "projects/*/*.jsonl")),
                      Reply("I added double() to lib.py."))
        daemon = daemons.start(env={**env, "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": binary,
                                    "ENACT_TASKS_CONFINEMENT": "auto"})
        shown = run_task(daemon, repo, "add a double function to lib.py")
        assert_reviewed_with_the_edit(daemon, repo, shown)
        assert shown["confined"] is True
        # settings.json was refused; CLAUDE.md was made, in the task's private directory.
        assert server.model_requests()[2].body.decode().count("Read-only file system") >= 1
        assert snapshot(config) == owners  # nothing written, made or left behind there
        assert_unseen_by_the_task(server)
        daemon.terminate()


STEER = """import sys
for path in sys.argv[1:]:
    try:
        with open(path, "a") as file:
            file.write("steered")
    except OSError as error:
        print("refused:", error)
"""
"""A repository's script that writes the files named on its command line."""


def test_a_confined_codex_task_cannot_rewrite_the_config_that_steers_later_codex_calls(
        daemons: DaemonFactory, server: ModelServer, tmp_path: Path, require_binary: Any) -> None:
    binary = real_cli("codex")
    require_binary("bwrap")
    names = ("config.toml", "AGENTS.md")
    with scratch_codex_home(server.url) as codex_home:
        # Codex's own sandbox keeps its shell tool out of CODEX_HOME; the
        # repository's validation runs under enact's confinement alone.
        targets = " ".join(str(codex_home / name) for name in names)
        validate = f"{sys.executable} steer.py {targets} && {pytest_doctor()}"
        repo = make_repo(tmp_path / "repo", files={"steer.py": STEER}, doctor=validate)
        owners_earlier_session(server, [binary, "exec", "--skip-git-repo-check", "-"], codex_env(codex_home),
                               tmp_path)
        owners = snapshot(codex_home)
        assert list((codex_home / "sessions").rglob("rollout-*.jsonl"))
        server.script(ToolCall(try_to_rewrite(codex_home, names, "sessions/**/rollout-*.jsonl")),
                      Reply("I added double() to lib.py."))
        env = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
        env.update({"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary, "ENACT_TASKS_CONFINEMENT": "auto"})
        daemon = daemons.start(env=env)
        shown = run_task(daemon, repo, "add a double function to lib.py")
        assert_reviewed_with_the_edit(daemon, repo, shown)
        assert shown["confined"] is True
        assert snapshot(codex_home) == owners  # nothing written, made or left behind there (nor a session)
        # The model's writes were tried and refused, and it was told so.
        assert server.model_requests()[2].body.decode().count("[Errno") >= len(names)
        assert_unseen_by_the_task(server)
        daemon.terminate()
