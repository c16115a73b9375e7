"""`enact runtime check` for Codex says whether the real Codex CLI has a way
to a model (a login, a key, a provider whose address answers), and the
committed example provider configuration works as written: a check and a
chat turn through the real CLI against the scripted model server."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from model_server import ModelServer, Reply, closed_port_url
from scratch_homes import scratch_dir

from enact.runtime._codex_provider import NO_WAY_TO_A_MODEL

from conftest import DaemonFactory, real_cli, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "codex-provider.toml"
EXAMPLE_ADDRESS = "http://localhost:11434"
"""Where the example sends Codex; the tests put the scripted model server there."""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as model:
        yield model


@pytest.fixture
def codex_home() -> Iterator[Path]:
    with scratch_dir("codex-home-") as directory:
        yield directory


def codex_vars(codex_home: Path, **extra: str) -> dict[str, str]:
    """The check's environment: the real CLI, this home, and no key from the test's own environment."""
    return {"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex"), "CODEX_HOME": str(codex_home),
            "CODEX_API_KEY": "", "OPENAI_API_KEY": "", **extra}


def check(home: Path, env: dict[str, str], *, code: int = 0) -> dict[str, Any]:
    result = run_cli(home, "runtime", "check", "--json", env=env, timeout=120)
    assert result.returncode == code, result
    report: dict[str, Any] = orjson.loads(result.stdout)
    return report


def example_for(server: ModelServer, codex_home: Path) -> None:
    """The committed example, unchanged but for its address, as Codex's config.toml."""
    text = EXAMPLE.read_text()
    assert text.count(EXAMPLE_ADDRESS) == 1
    (codex_home / "config.toml").write_text(text.replace(EXAMPLE_ADDRESS, server.url))


def test_codex_with_no_login_and_no_provider_is_not_ready(tmp_path: Path, codex_home: Path) -> None:
    report = check(tmp_path, codex_vars(codex_home), code=1)
    assert (report["ok"], report["version"], report["problems"]) == (False, "codex-cli 0.169.0", [NO_WAY_TO_A_MODEL])
    text = run_cli(tmp_path, "runtime", "check", env=codex_vars(codex_home))
    assert text.returncode == 1 and f"missing  {NO_WAY_TO_A_MODEL}" in text.stdout


def test_a_codex_login_or_key_makes_the_built_in_provider_ready(tmp_path: Path, codex_home: Path) -> None:
    keyed = check(tmp_path, codex_vars(codex_home, CODEX_API_KEY="sk-test"))
    assert keyed["ok"] is True and "key: CODEX_API_KEY from the environment" in keyed["notes"]
    subprocess.run([real_cli("codex"), "login", "--with-api-key"], input="sk-test", text=True, check=True,
                   capture_output=True, env={"CODEX_HOME": str(codex_home), "PATH": "/usr/bin:/bin"})
    logged_in = check(tmp_path, codex_vars(codex_home))
    assert logged_in["ok"] is True and "login: `codex login status` says logged in" in logged_in["notes"]


def test_a_configured_provider_needs_its_key_variable_and_an_address_that_answers(
        tmp_path: Path, codex_home: Path) -> None:
    config, closed_url = codex_home / "config.toml", closed_port_url()
    config.write_text(f'model_provider = "far"\n[model_providers.far]\nname = "far"\n'
                      f'base_url = "{closed_url}/v1"\nwire_api = "responses"\nenv_key = "FAR_KEY"\n')
    [no_key] = check(tmp_path, codex_vars(codex_home), code=1)["problems"]
    assert no_key == f"[model_providers.far] in {config} reads its key from FAR_KEY, which is not set in the " \
                     "daemon's environment: set it there"
    [closed] = check(tmp_path, codex_vars(codex_home, FAR_KEY="k"), code=1)["problems"]
    assert closed.startswith(f"cannot reach {closed_url}/v1 (the base_url of [model_providers.far] in ")


def test_the_example_provider_passes_the_check_and_answers_a_chat_turn_through_the_real_codex(
        tmp_path: Path, server: ModelServer, codex_home: Path, daemons: DaemonFactory) -> None:
    example_for(server, codex_home)
    report = check(tmp_path, codex_vars(codex_home))
    assert (report["ok"], report["problems"]) == (True, [])
    assert f"model provider 'local' at {server.url}/v1" in report["notes"]
    assert server.requests == []  # the check calls no model

    server.script(Reply("Hello from the example provider."))
    daemon = daemons.start(env={"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex"),
                                "CODEX_HOME": str(codex_home)})
    sent = daemon.cli("send", "--json", "hello through codex")
    assert sent.returncode == 0, sent
    assert orjson.loads(sent.stdout)["reply"] == "Hello from the example provider."
    [call] = server.model_requests()
    assert call.json()["model"] == "llama3.2" and "hello through codex" in orjson.dumps(call.json()["input"]).decode()
