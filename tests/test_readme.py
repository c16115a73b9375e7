"""The README is the user's manual: it must not drift from the code."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path

import orjson

from enact import own_settings
from enact.cli._group import main
from enact.components import builtin
from enact.home import SOCKET_NAME
from enact.messages._framing import MAX_FRAME_BYTES

from conftest import DaemonFactory, enact_env

README = (Path(__file__).parent.parent / "README.md").read_text()
SETTINGS = builtin(own=own_settings.SETTINGS).settings()
"""The daemon's own settings and those of enact's built-in components."""


def test_readme_documents_every_setting_and_its_variable() -> None:
    for setting in SETTINGS:
        assert f"`{setting.key}`" in README, setting.key
        assert f"`{setting.env_name}`" in README, setting.env_name


def _settings_row(key: str) -> list[str]:
    [row] = [line for line in README.splitlines() if line.startswith(f"| `{key}` |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_readme_gives_each_settings_allowed_range_as_the_code_checks_it() -> None:
    for setting in SETTINGS:
        allowed = _settings_row(setting.key)[3]
        assert allowed.startswith(setting.allowed), (setting.key, allowed, setting.allowed)


def test_readme_names_the_component_that_declares_each_setting() -> None:
    for setting in SETTINGS:
        assert _settings_row(setting.key)[5] == setting.component, setting.key


def test_readme_says_who_handles_each_wire_prefix() -> None:
    from enact.messages import Kind, registered

    section = _section("## Architecture")
    # enact's own requests only: other tests register types of their own.
    own = {r.actor for r in registered() if r.kind is Kind.REQUEST and r.cls.__module__.startswith("enact.")}
    for prefix in sorted(own):
        assert re.search(rf"^\|[^|\n]*`{prefix}`[^|\n]*\| ", section, re.MULTILINE), prefix


def test_readme_shows_both_forms_of_every_list_valued_variable() -> None:
    for setting in SETTINGS:
        if setting.kind is list:
            assert f"`{setting.env_name}='[" in README, setting.env_name
            assert re.search(rf"`{setting.env_name}=[^'`\s]+,[^`\s]+`", README), setting.env_name


def test_readme_lists_every_top_level_command() -> None:
    for name in main.commands:
        assert f"`enact {name}" in README, name


def test_readme_shows_the_two_commands() -> None:
    assert "make run" in README and "make test" in README


def _section(heading: str) -> str:
    start = README.index(f"\n{heading}\n")
    end = README.find("\n#", start + len(heading) + 2)
    return README[start : end if end != -1 else len(README)]


def test_the_readmes_frame_example_gets_a_status_report_from_a_daemon(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    section = _section("### The control-socket frame format")
    [example] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    result = subprocess.run(
        [sys.executable, "-c", example], env=enact_env(daemon.home), capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["control.StatusReport", "1"]


def test_a_frame_the_daemon_cannot_decode_gets_the_error_shape_the_readme_gives(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    section = _section("### The control-socket frame format")
    assert "4-byte unsigned big-endian length" in section and f"({MAX_FRAME_BYTES} bytes" in section
    assert '{"type": "control.Error", "body": {"message": "…"}}' in section
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.home / SOCKET_NAME))
        payload = b'{"type": "control.Nope", "body": {}}'
        sock.sendall(struct.pack(">I", len(payload)) + payload)
        reply = orjson.loads(sock.makefile("rb").read()[4:])  # the daemon closes after an error
    assert reply["type"] == "control.Error"
    assert "control.Nope" in reply["body"]["message"]


def test_the_readmes_completion_commands_print_a_completion_script() -> None:
    shells = re.findall(r"_ENACT_COMPLETE=(\w+)_source enact", _section("### Shell completion"))
    assert sorted(shells) == ["bash", "fish", "zsh"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    for shell in shells:
        result = subprocess.run(
            [sys.executable, "-m", "enact"], env={**env, "_ENACT_COMPLETE": f"{shell}_source"},
            capture_output=True, text=True, timeout=30,
        )
        assert result.returncode == 0, result.stderr
        assert "_enact_completion" in result.stdout, shell
