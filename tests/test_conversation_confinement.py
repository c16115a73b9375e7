"""A conversation's calls of the real Codex and Claude Code CLIs are
confined like a task's: when the scripted model has the CLI run a command
(Codex) or read a file (Claude Code, whose conversations have no shell),
neither the daemon's LMDB (with a secret fact in it) nor the daemon's
ENACT_* settings nor other secrets of its environment reach the model."""

from __future__ import annotations

import shutil
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import orjson
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, ToolCall
from scratch_homes import scratch_dir

from conftest import Daemon, DaemonFactory, real_cli

SECRET = "the safe opens with 4471"
LEAKS = {"OPENAI_API_KEY": "sk-conversation-leak", "GITHUB_TOKEN": "ghp_conversation_leak",
         "AWS_SECRET_ACCESS_KEY": "aws-conversation-leak"}

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")


def remember_a_secret(daemon: Daemon) -> None:
    remembered = daemon.cli("memory", "remember", "--sensitivity", "secret", SECRET)
    assert remembered.returncode == 0, remembered.stderr
    data = (daemon.home / "state" / "data.mdb").read_bytes()
    assert b"4471" in data  # what a command reading the file would find


def send(daemon: Daemon, text: str) -> str:
    result = daemon.cli("send", "--json", text, timeout=120)
    assert result.returncode == 0, (result, daemon.log_text())
    reply: str = orjson.loads(result.stdout)["reply"]
    return reply


def what_the_model_was_told(server: ModelServer) -> str:
    """Every request after the first: they carry the tools' outputs."""
    return "\n".join(request.body.decode(errors="replace") for request in server.model_requests()[1:])


def assert_nothing_leaked(told: str) -> None:
    assert "4471" not in told
    assert "ENACT_" not in told
    assert not [value for value in LEAKS.values() if value in told]


def test_a_codex_conversations_commands_reach_neither_the_daemons_state_nor_its_secrets(
        daemons: DaemonFactory) -> None:
    binary = real_cli("codex")
    with ModelServer() as server, scratch_codex_home(server.url) as codex_home:
        home = daemons.new_home()
        probe = (f"grep -a -o 'safe opens with [0-9]*' {home}/state/data.mdb; ls {home}; env; "
                 f"grep -a -o 'ENACT[_][A-Z]*' /proc/*/environ | sort -u")
        server.script(ToolCall(probe), Reply("probed"))
        env: dict[str, Any] = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
        daemon = daemons.start(home, env={**env, **LEAKS, "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary})
        remember_a_secret(daemon)
        assert send(daemon, "run the probe") == "probed"
        told = what_the_model_was_told(server)
        assert "PATH=" in told and "No such file or directory" in told, told  # the command ran, and found no home
        assert_nothing_leaked(told)
        assert FAKE_KEY_VARIABLE not in told  # codex's own key is kept from its commands


def test_a_claude_conversations_reads_reach_neither_the_daemons_home_nor_its_secrets(
        daemons: DaemonFactory) -> None:
    """Claude Code's conversations have no shell, and its Read tool refuses
    binary files, /proc and paths outside its working directory by itself;
    tried here: a link in its working directory to a text file in the home
    (a stand-in for a token in a config), and a plain file there, which it
    reads. Measured: with ``tasks.confinement = off`` this passes too (Claude
    Code refuses the link itself), so this pins that nothing leaks, not that
    the confinement is what stops it; the Codex test above is the one that
    fails unconfined."""
    binary = real_cli("claude")
    with ModelServer() as server, scratch_dir("claude-home-") as owner_home:
        home = daemons.new_home()
        (home / "owner-notes.txt").write_text(f"{SECRET}\n")
        workdir = home / "claude"
        workdir.mkdir()
        (workdir / "plain.txt").write_text("a file of the conversation\n")
        (workdir / "notes.txt").symlink_to(home / "owner-notes.txt")
        server.script(ToolCall(f"{workdir}/notes.txt", tool="Read"), ToolCall(f"{workdir}/plain.txt", tool="Read"),
                      Reply("read"))
        daemon = daemons.start(home, env={**claude_env(owner_home, server.url), **LEAKS,
                                          "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": binary})
        remember_a_secret(daemon)
        assert send(daemon, "read the files") == "read"
        told = what_the_model_was_told(server)
        assert "a file of the conversation" in told, told  # the reads were made
        assert_nothing_leaked(told)
