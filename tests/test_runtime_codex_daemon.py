"""End to end: a daemon with ENACT_RUNTIME_ADAPTER=codex, the real Codex CLI
and the scripted model server."""

from __future__ import annotations

import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, Status, Tokens

from conftest import Daemon, DaemonFactory, real_cli


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


@pytest.fixture
def codex_home(server: ModelServer) -> Iterator[Path]:
    with scratch_codex_home(server.url) as directory:
        yield directory


@pytest.fixture
def daemon(daemons: DaemonFactory, codex_home: Path) -> Daemon:
    binary = real_cli("codex")
    env = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
    env.update({"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": binary})
    return daemons.start(env=env)


def send(daemon: Daemon, text: str) -> str:
    result = daemon.cli("send", "--json", text)
    assert result.returncode == 0, result
    reply: str = orjson.loads(result.stdout)["reply"]
    return reply


def _input(server: ModelServer, index: int) -> str:
    return orjson.dumps(server.model_requests()[index].json()["input"]).decode()


def metrics_text(daemon: Daemon) -> str:
    address = daemon.cli_json("status", "--json")["metrics_addr"]
    return str(urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode())


def test_codex_answers_resumes_and_recovers_from_a_lost_session(daemon: Daemon, server: ModelServer,
                                                               codex_home: Path) -> None:
    server.script(Reply("Hello, I am Codex.", tokens=Tokens(input=100, cached_input=40, output=10, reasoning=5)),
                  Reply("You said the word walnut."), Reply("A fresh start."))
    assert send(daemon, "hello, remember walnut") == "Hello, I am Codex."
    first = _input(server, 0)
    assert "You are enact" in first and "hello, remember walnut" in first

    assert send(daemon, "which word?") == "You said the word walnut."
    second = _input(server, 1)
    assert "hello, remember walnut" in second and "Hello, I am Codex." in second  # the resumed thread

    shutil.rmtree(codex_home / "sessions")  # Codex's store is gone: the resume fails
    assert send(daemon, "still there?") == "A fresh start."
    third = _input(server, 2)
    assert "You are enact" in third and "walnut" not in third  # a new session, told the startup context again
    assert "codex has no session" in daemon.log_text() or "not known to the runtime" in daemon.log_text()


def test_a_memory_marker_in_codexs_answer_is_handled(daemon: Daemon, server: ModelServer) -> None:
    server.script(Reply("Noted. [MEMORY]the owner drinks green tea[/MEMORY]"))
    reply = send(daemon, "I drink green tea")
    assert reply.startswith("Noted.") and "[MEMORY]" not in reply
    assert "(memory: saved as" in reply
    assert "the owner drinks green tea" in daemon.cli("memory", "list", "--json").stdout


def test_a_refused_login_reaches_the_owner_with_what_to_do_and_send_fails_on_the_runtime(
        daemon: Daemon, server: ModelServer) -> None:
    server.default = Status(401, "bad key")
    result = daemon.cli("send", "--json", "hello", timeout=90)  # Codex retries a 401 five times (about 7 s)
    assert result.returncode == 1, result
    outcome = orjson.loads(result.stdout)
    reply = outcome["reply"]
    assert "refused" in reply and "codex login" in reply and "enact runtime check --probe" in reply
    assert outcome["status"] == "runtime_failed" and outcome["error"].startswith("RuntimeAuthFailed: codex: ")
    assert "401" in outcome["error"]


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            series, _, value = line.rpartition(" ")
            got = ",".join(sorted(series[len(name) + 1:-1].split(",")))
            if got == wanted:
                return float(value)
    raise AssertionError(f"no {name}{{{wanted}}} in the metrics")


def test_tokens_of_each_call_show_in_metrics_and_in_status(daemon: Daemon, server: ModelServer) -> None:
    server.script(Reply("one", tokens=Tokens(input=100, cached_input=40, output=10, reasoning=5)),
                  Reply("two", tokens=Tokens(input=200, cached_input=150, output=20, reasoning=0)))
    send(daemon, "first")
    send(daemon, "second")
    text = metrics_text(daemon)
    spent: dict[str, Any] = {kind: _metric(text, "enact_runtime_tokens_total", adapter="codex", kind=kind,
                                          purpose="conversation")
                             for kind in ("input", "cached_input", "output", "reasoning")}
    assert spent == {"input": 300, "cached_input": 190, "output": 30, "reasoning": 5}
    assert _metric(text, "enact_runtime_call_seconds_count", adapter="codex", purpose="conversation") == 2
    assert _metric(text, "enact_runtime_calls_total", adapter="codex", outcome="ok", purpose="conversation") == 2
    today = daemon.cli_json("status", "--json")["spending"]
    assert today[0]["purpose"] == "conversation" and today[0]["input_tokens"] == 300 and today[0]["calls"] == 2
    assert "conversation" in daemon.cli("status").stdout
