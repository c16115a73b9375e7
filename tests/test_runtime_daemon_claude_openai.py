"""End to end: a running daemon with the claude and the openai runtimes
answers `enact send` through the scripted model server and resumes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import model_chat  # noqa: F401  (registers /v1/chat/completions)
import orjson
import pytest
from claude_home import claude_env
from model_server import ModelServer, Reply, closed_port_url

from enact.runtime.advice import LOGIN_HINTS, UNAVAILABLE_HINTS

from conftest import Daemon, DaemonFactory, real_cli


@pytest.fixture
def server() -> ModelServer:
    with ModelServer() as running:
        yield running  # type: ignore[misc]


def send(daemon: Daemon, text: str) -> dict[str, Any]:
    result = daemon.cli("send", "--json", text, timeout=90)
    assert result.returncode == 0, (result, daemon.log_text())
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    return outcome


def test_openai_answers_and_sends_the_history_with_the_second_message(
    daemons: DaemonFactory, server: ModelServer
) -> None:
    env = {"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
           "ENACT_OPENAI_MODEL": "llama-test"}
    daemon = daemons.start(env=env)
    server.script(Reply("first answer"), Reply("second answer"), Reply("third answer"))
    assert send(daemon, "the first question")["reply"] == "first answer"
    assert send(daemon, "the second question")["reply"] == "second answer"
    first, second = (r.json()["messages"] for r in server.model_requests())
    assert len(first) == 1 and "You are enact" in first[0]["content"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[0] == first[0] and second[1]["content"] == "first answer"
    assert "the second question" in second[2]["content"] and "You are enact" not in second[2]["content"]
    # The history is in LMDB: a restarted daemon sends it all the same.
    daemon.terminate()
    daemon = daemons.start(daemon.home, env=env)
    assert send(daemon, "the third question")["reply"] == "third answer"
    third = server.model_requests()[2].json()["messages"]
    assert len(third) == 5 and third[0] == first[0]
    assert [m["content"] for m in third[1:4]] == ["first answer", second[2]["content"], "second answer"]


def send_failing_on_the_runtime(daemon: Daemon, text: str) -> dict[str, Any]:
    """``send`` of a message the runtime cannot answer: the owner gets the
    advice as the reply, and the outcome says the turn failed on the runtime."""
    result = daemon.cli("send", "--json", text, timeout=90)
    assert result.returncode == 1, (result, daemon.log_text())
    outcome: dict[str, Any] = orjson.loads(result.stdout)
    assert outcome["status"] == "runtime_failed", outcome
    return outcome


def claude_vars(tmp: Path, server: ModelServer) -> dict[str, str]:
    return {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
            **claude_env(tmp / "claude-home", server.url)}


def test_claude_answers_resumes_and_recovers_from_a_lost_session(
    daemons: DaemonFactory, server: ModelServer
) -> None:
    home = daemons.new_home()
    env = claude_vars(home.parent, server)
    daemon = daemons.start(home, env=env)
    server.script(Reply("first answer"), Reply("second answer"), Reply("fresh answer"))
    assert send(daemon, "the first question")["reply"] == "first answer"
    assert send(daemon, "the second question")["reply"] == "second answer"
    resumed = server.model_requests()[1].body
    assert b"the first question" in resumed and b"first answer" in resumed
    assert (home / "claude").is_dir()  # conversations run in one directory, so resumes find their sessions
    # Claude Code's session store is wiped: the resume fails, enact starts afresh.
    shutil.rmtree(Path(env["CLAUDE_CONFIG_DIR"]) / "projects")
    assert send(daemon, "the third question")["reply"] == "fresh answer"
    fresh = server.model_requests()[-1].body
    assert b"You are enact" in fresh and b"the first question" not in fresh


def test_openai_refusing_the_key_tells_the_owner_what_to_set_and_send_fails_on_the_runtime(
        daemons: DaemonFactory, server: ModelServer) -> None:
    from model_server import Status

    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
                                "ENACT_OPENAI_MODEL": "llama-test"})
    server.script(Status(401, "invalid api key"))
    outcome = send_failing_on_the_runtime(daemon, "hello")
    assert "invalid api key" in outcome["reply"] and f"To fix it, {LOGIN_HINTS['openai']}" in outcome["reply"]
    assert outcome["error"].startswith("RuntimeAuthFailed: ") and "answered 401: invalid api key" in outcome["error"]
    # Without --json: the advice on stdout, the failure on stderr, exit 1.
    server.script(Status(401, "invalid api key"))
    plain = daemon.cli("send", "hello again", timeout=90)
    assert plain.returncode == 1 and LOGIN_HINTS["openai"] in plain.stdout
    assert "the runtime could not answer" in plain.stderr and "401" in plain.stderr
    [first, second] = daemon.cli_json("turns", "--json")
    assert first["outcome"] == second["outcome"] == "runtime_failed" and "401" in first["error"]
    # Answered again: replied, exit 0, no error.
    server.script(Reply("back"))
    answered = send(daemon, "and now?")
    assert (answered["reply"], answered["status"], answered["error"]) == ("back", "replied", "")


def test_openai_endpoint_down_tells_the_owner_to_start_it_and_send_fails_on_the_runtime(
        daemons: DaemonFactory) -> None:
    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": closed_port_url(),
                                "ENACT_OPENAI_MODEL": "llama-test"})
    outcome = send_failing_on_the_runtime(daemon, "hello")
    reply = outcome["reply"]
    assert "is not available (cannot reach" in reply and f"To fix it, {UNAVAILABLE_HINTS['openai']}" in reply
    assert outcome["error"].startswith("RuntimeUnavailable: cannot reach")


def test_claude_refused_by_its_model_tells_the_owner_how_to_log_in_and_send_fails_on_the_runtime(
        daemons: DaemonFactory, tmp_path: Path, server: ModelServer) -> None:
    from model_server import Status

    server.default = Status(401, "invalid x-api-key")
    daemon = daemons.start(env=claude_vars(tmp_path, server))
    outcome = send_failing_on_the_runtime(daemon, "hello")
    reply = outcome["reply"]
    assert "was refused by its model" in reply and f"To fix it, {LOGIN_HINTS['claude']}" in reply
    assert "claude auth login" in LOGIN_HINTS["claude"] and "ANTHROPIC_API_KEY" in LOGIN_HINTS["claude"]
    assert outcome["error"].startswith("RuntimeAuthFailed: claude: ") and "HTTP 401" in outcome["error"]


def test_claude_unable_to_reach_its_api_tells_the_owner_what_to_check_and_send_fails_on_the_runtime(
        daemons: DaemonFactory, tmp_path: Path, server: ModelServer) -> None:
    env = {**claude_vars(tmp_path, server), "ANTHROPIC_BASE_URL": closed_port_url().removesuffix("/v1")}
    daemon = daemons.start(env=env)
    outcome = send_failing_on_the_runtime(daemon, "hello")
    reply = outcome["reply"]
    assert "is not available" in reply and f"To fix it, {UNAVAILABLE_HINTS['claude']}" in reply
    assert outcome["error"].startswith("RuntimeUnavailable: claude: ")


@pytest.mark.parametrize(("status", "error_class"), [(429, "RuntimeRateLimited"), (500, "RuntimeFailure")])
def test_openai_rate_limited_or_failing_is_retried_and_then_the_turn_fails(
        daemons: DaemonFactory, server: ModelServer, status: int, error_class: str) -> None:
    from model_server import Status

    server.default = Status(status, "try later", retry_after=0)
    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": f"{server.url}/v1",
                                "ENACT_OPENAI_MODEL": "llama-test"})
    result = daemon.cli("send", "--json", "hello", timeout=90)
    assert result.returncode == 1, result
    outcome = orjson.loads(result.stdout)
    # Not the owner's to fix: retried (the runtime's three tries in each of the inbox's attempts), then given up.
    assert (outcome["status"], outcome["attempts"]) == ("failed", 3)
    assert outcome["error"].startswith(f"{error_class}: ") and f"answered {status}: try later" in outcome["error"]
    assert len(server.model_requests()) == 9
