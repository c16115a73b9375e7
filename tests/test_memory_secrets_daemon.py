"""A credential the memory refused, sent by a model (a ``remember`` action or
a ``[MEMORY]`` marker), reaches neither the reply, the turn log, the journal,
the daemon log, the stored session history nor a later model call."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import model_chat  # noqa: F401  (registers /v1/chat/completions)
import orjson
import pytest
from model_server import ModelServer, Reply

from enact.credentials import REDACTED
from enact.home import STATE_DIR

from conftest import Daemon, DaemonFactory

_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2

RULES = textwrap.dedent(f'''
    [[rule]]
    match = "keep the deploy key"
    action = "remember"
    args = {{ text = "the deploy token is {_TOKEN}" }}
    then = "Got: {{receipt}}"
''')


def send(daemon: Daemon, text: str) -> dict[str, Any]:
    result = daemon.cli("send", "--json", text, timeout=90)
    assert result.returncode == 0, (result, daemon.log_text())
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    return outcome


def assert_state_has_no_token(home: Path) -> None:
    """Every LMDB file (the journal, the turn log, the sessions' histories,
    the facts), byte for byte: freed pages included."""
    for path in (home / STATE_DIR).iterdir():
        assert _TOKEN.encode() not in path.read_bytes(), path.name


def test_a_remember_action_with_a_credential_leaves_no_trace(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(RULES)
    calls = home.parent / "transcript.jsonl"
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
    outcome = send(daemon, "keep the deploy key")
    [action] = outcome["actions"]
    assert action["command"] == "remember" and action["ok"] is False
    assert "credential (GitHub token)" in action["receipt"]
    assert action["args"] == {"text": f"the deploy token is {REDACTED}"}
    assert daemon.cli_json("memory", "list", "--json")["facts"] == []
    turns = daemon.cli("turns", "--json")
    assert turns.returncode == 0 and _TOKEN not in turns.stdout
    assert f"the deploy token is {REDACTED}" in turns.stdout
    prompts = [orjson.loads(line)["prompt"] for line in calls.read_text().splitlines()]
    assert len(prompts) == 2 and all(_TOKEN not in prompt for prompt in prompts)
    daemon.terminate()
    assert _TOKEN not in daemon.log_text()
    assert_state_has_no_token(home)


@pytest.fixture
def server() -> ModelServer:
    with ModelServer() as running:
        yield running  # type: ignore[misc]


def test_a_refused_marker_is_not_kept_in_the_openai_history(daemons: DaemonFactory, server: ModelServer) -> None:
    env = {"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
           "ENACT_OPENAI_MODEL": "llama-test"}
    daemon = daemons.start(env=env)
    server.script(Reply(f"Sure. [MEMORY]the deploy token is {_TOKEN}[/MEMORY]"), Reply("second answer"))
    first = send(daemon, "store the deploy key")
    assert "not saved, refused: the text contains a credential (GitHub token)" in first["reply"]
    assert send(daemon, "the second question")["reply"] == "second answer"
    second = server.model_requests()[1].json()["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert _TOKEN not in orjson.dumps(second).decode()
    assert second[1]["content"] == f"Sure. [MEMORY]the deploy token is {REDACTED}[/MEMORY]"
    daemon.terminate()
    assert _TOKEN not in daemon.log_text()
    assert_state_has_no_token(daemon.home)
