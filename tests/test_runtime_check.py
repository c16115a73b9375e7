"""`enact runtime check`: what a new user is told about the selected runtime."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import model_chat  # noqa: F401  (registers /v1/chat/completions and /v1/models)
import orjson
import pytest
from claude_home import claude_env
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, SilentServer, Stall, Status, closed_port_url

from enact.cli._runtime import PROBE_GRACE_S

from conftest import real_cli, run_cli


def check(home: Path, *args: str, env: dict[str, str] | None = None, code: int = 0) -> dict[str, Any]:
    result = run_cli(home, "runtime", "check", "--json", *args, env=env, timeout=120)
    assert result.returncode == code, result
    report: dict[str, Any] = orjson.loads(result.stdout)
    return report


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


@pytest.fixture
def codex_vars(server: ModelServer) -> Iterator[dict[str, str]]:
    with scratch_codex_home(server.url) as directory:
        env = codex_env(directory)
        yield {"CODEX_HOME": env["CODEX_HOME"], FAKE_KEY_VARIABLE: env[FAKE_KEY_VARIABLE],
               "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex")}


def test_the_default_scripted_runtime_is_built_in_and_usable(tmp_path: Path) -> None:
    report = check(tmp_path)
    assert (report["adapter"], report["found"], report["ok"], report["problems"]) == ("scripted", "built in", True, [])


def test_codex_missing_from_path_is_named_with_how_to_install_it(tmp_path: Path) -> None:
    bare_path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    report = check(tmp_path, env={"ENACT_RUNTIME_ADAPTER": "codex", "PATH": bare_path}, code=1)
    assert report["ok"] is False and report["found"] == ""
    assert "codex is not on PATH" in report["problems"][0] and "npm install -g @openai/codex" in report["problems"][0]
    text = run_cli(tmp_path, "runtime", "check", env={"ENACT_RUNTIME_ADAPTER": "codex", "PATH": bare_path})
    assert text.returncode == 1 and "missing  codex is not on PATH" in text.stdout


def test_an_explicit_codex_path_that_does_not_exist_is_the_problem(tmp_path: Path) -> None:
    report = check(tmp_path, env={"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": "/nowhere/codex"}, code=1)
    assert report["problems"] == ["ENACT_CODEX_BIN: /nowhere/codex is not an executable file; fix it or unset it"]


def test_a_bad_setting_is_one_json_error(tmp_path: Path) -> None:
    report = check(tmp_path, env={"ENACT_RUNTIME_ADAPTER": "nope"}, code=2)
    assert "runtime.adapter" in report["error"]


def test_codex_found_with_its_version_and_a_probe_that_answers(tmp_path: Path, server: ModelServer,
                                                              codex_vars: dict[str, str]) -> None:
    server.script(Reply("ready"))
    report = check(tmp_path, "--probe", env=codex_vars)
    assert report["found"] == codex_vars["ENACT_CODEX_BIN"] and report["version"] == "codex-cli 0.169.0"
    assert report["probe"]["ok"] is True and report["probe"]["reply"] == "ready"
    assert report["probe"]["usage"]["input"] > 0
    assert "connectivity check" in orjson.dumps(server.model_requests()[0].json()["input"]).decode()


def test_a_probe_refused_by_the_model_says_auth(tmp_path: Path, server: ModelServer,
                                              codex_vars: dict[str, str]) -> None:
    server.default = Status(401)
    report = check(tmp_path, "--probe", env=codex_vars, code=1)
    assert report["probe"]["ok"] is False and report["probe"]["kind"] == "auth"
    assert os.path.exists(codex_vars["ENACT_CODEX_BIN"])


REPORT_KEYS = {"adapter", "source", "found", "version", "problems", "notes", "ok"}


def openai_vars(base_url: str, **extra: str) -> dict[str, str]:
    return {"ENACT_RUNTIME_ADAPTER": "openai", "ENACT_OPENAI_BASE_URL": base_url, **extra}


def test_openai_endpoint_up_lists_its_models_and_a_probe_answers(tmp_path: Path, server: ModelServer) -> None:
    server.script(Reply("ready"))
    report = check(tmp_path, "--probe", env=openai_vars(f"{server.url}/v1", ENACT_OPENAI_MODEL="llama-test"))
    assert set(report) == REPORT_KEYS | {"probe"}
    assert (report["adapter"], report["found"], report["problems"], report["ok"]) == (
        "openai", f"{server.url}/v1", [], True)
    assert report["notes"] == ["models offered: llama-test"]
    assert report["probe"]["ok"] is True and report["probe"]["reply"] == "ready"
    assert [r.path for r in server.requests] == ["/v1/models", "/v1/chat/completions"]
    assert server.model_requests()[0].json()["model"] == "llama-test"


def test_openai_endpoint_down_says_to_start_it_or_set_the_base_url(tmp_path: Path) -> None:
    base = closed_port_url()
    report = check(tmp_path, "--probe", env=openai_vars(base, ENACT_OPENAI_MODEL="llama-test"), code=1)
    assert set(report) == REPORT_KEYS and report["found"] == "" and report["ok"] is False
    [problem] = report["problems"]
    assert problem.startswith(f"cannot reach {base}: ") and "ENACT_OPENAI_BASE_URL" in problem
    unset = check(tmp_path, env=openai_vars(base), code=1)
    assert unset["problems"][1:] == ["no model is set: set ENACT_OPENAI_MODEL (runtime.openai.model), e.g. llama3.2"]


def test_openai_refusing_the_key_names_the_key_variable(tmp_path: Path) -> None:
    with ModelServer(api_key="the-right-key") as guarded:
        base = f"{guarded.url}/v1"
        wrong = check(tmp_path, env=openai_vars(base, ENACT_OPENAI_MODEL="m", ENACT_OPENAI_API_KEY="wrong"), code=1)
        missing = check(tmp_path, env=openai_vars(base, ENACT_OPENAI_MODEL="m"), code=1)
        right = check(tmp_path, env=openai_vars(base, ENACT_OPENAI_MODEL="llama-test",
                                                ENACT_OPENAI_API_KEY="the-right-key"))
        assert guarded.requests[0].headers["authorization"] == "Bearer wrong"
    assert wrong["problems"] == [f"{base} refused the key (401: invalid api key); "
                                 "set ENACT_OPENAI_API_KEY to a key it accepts"]
    assert missing["problems"] == [f"{base} refused a call without a key (401: invalid api key); "
                                   "it needs a key: set ENACT_OPENAI_API_KEY"]
    assert right["ok"] is True


def test_openai_without_a_model_says_which_variable_to_set(tmp_path: Path, server: ModelServer) -> None:
    report = check(tmp_path, "--probe", env=openai_vars(f"{server.url}/v1"), code=1)
    assert report["problems"] == ["no model is set: set ENACT_OPENAI_MODEL (runtime.openai.model), e.g. llama-test"]
    assert "probe" not in report and server.model_requests() == []
    text = run_cli(tmp_path, "runtime", "check", env=openai_vars(f"{server.url}/v1"))
    assert text.returncode == 1 and "missing  no model is set: set ENACT_OPENAI_MODEL" in text.stdout


def claude_vars(tmp_path: Path, server: ModelServer, *, key: str = "sk-ant-test") -> dict[str, str]:
    return {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
            **claude_env(tmp_path / "claude-home", server.url, key=key)}


def test_claude_found_with_its_version_login_and_a_probe_that_answers(tmp_path: Path, server: ModelServer) -> None:
    server.script(Reply("ready"))
    env = claude_vars(tmp_path, server)
    report = check(tmp_path / "enact", "--probe", env=env)
    assert set(report) == REPORT_KEYS | {"probe"}
    assert (report["found"], report["version"], report["problems"]) == (
        env["ENACT_CLAUDE_BIN"], "2.1.328 (Claude Code)", [])
    assert report["notes"] == ["login: api_key from ANTHROPIC_API_KEY"]
    assert report["probe"]["ok"] is True and report["probe"]["reply"] == "ready"
    assert "connectivity check" in server.model_requests()[-1].body.decode()


def test_claude_without_a_login_or_key_says_how_to_log_in(tmp_path: Path, server: ModelServer) -> None:
    report = check(tmp_path / "enact", env=claude_vars(tmp_path, server, key=""), code=1)
    assert report["version"] == "2.1.328 (Claude Code)"
    assert report["problems"] == ["Claude Code is not logged in and has no key: run `claude auth login`, "
                                  "or set ANTHROPIC_API_KEY in the daemon's environment"]
    assert server.requests == []  # the login is read from local state, not asked of the model


def test_an_explicit_claude_path_that_does_not_exist_is_the_problem(tmp_path: Path) -> None:
    env = {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": "/nowhere/claude"}
    report = check(tmp_path, "--probe", env=env, code=1)
    assert set(report) == REPORT_KEYS and report["found"] == ""
    assert report["problems"] == ["ENACT_CLAUDE_BIN: /nowhere/claude is not an executable file; fix it or unset it"]


def probe_that_waits(home: Path, env: dict[str, str], *args: str) -> tuple[dict[str, Any], float]:
    """``runtime check --probe --timeout 2`` against a model that never
    answers: the report, and how long the check took."""
    started = time.monotonic()
    report = check(home, "--probe", "--timeout", "2", *args, env=env, code=1)
    return report, time.monotonic() - started


def test_a_codex_probe_of_a_model_that_never_answers_ends_at_its_bound_and_says_what_it_waited_for(
        tmp_path: Path) -> None:
    with SilentServer() as silent, scratch_codex_home(silent.url) as directory:
        env = {"CODEX_HOME": str(directory), FAKE_KEY_VARIABLE: "not-a-real-key",
               "ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex")}
        report, took = probe_that_waits(tmp_path, env)
    probe = report["probe"]
    assert (report["ok"], probe["ok"], probe["kind"]) == (False, False, "timeout")
    assert probe["waited_for"] == f"codex exec, which waits for its model provider 'fake' at {silent.url}/v1"
    assert probe["error"].startswith(f"no answer within 2 s from {probe['waited_for']}")
    assert took < 2 + PROBE_GRACE_S + 10  # codex's start and the check itself; never its own minutes of retries


def test_a_claude_probe_of_a_model_that_never_answers_ends_at_its_bound(tmp_path: Path) -> None:
    with SilentServer() as silent:
        env = {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
               **claude_env(tmp_path / "claude-home", silent.url)}
        report, took = probe_that_waits(tmp_path / "enact", env)
        text = run_cli(tmp_path / "enact", "runtime", "check", "--probe", "--timeout", "1", env=env, timeout=60)
    probe = report["probe"]
    assert probe["kind"] == "timeout" and f"waits for its model at {silent.url}" in probe["waited_for"]
    assert took < 2 + PROBE_GRACE_S + 10
    assert text.returncode == 1 and f"probe    failed (timeout): no answer within 1 s from {env['ENACT_CLAUDE_BIN']}" \
        in text.stdout


def test_an_openai_probe_of_an_endpoint_that_stalls_ends_at_its_bound(tmp_path: Path, server: ModelServer) -> None:
    server.default = Stall()  # the model list answers; the completion sends its headers and then nothing
    report, took = probe_that_waits(tmp_path, openai_vars(f"{server.url}/v1", ENACT_OPENAI_MODEL="llama-test"))
    probe = report["probe"]
    assert probe["kind"] == "timeout" and took < 2 + PROBE_GRACE_S + 5
    assert probe["error"].startswith(f"no answer within 2 s from {server.url}/v1/chat/completions (model llama-test)")
