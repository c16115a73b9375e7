"""`enact runtime check`: what a new user is told about the selected runtime."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
from model_server import ModelServer, Reply, Status

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
