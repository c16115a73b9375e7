"""The README is the user's manual: it must not drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from enact.cli import main
from enact.config import SETTINGS

README = (Path(__file__).parent.parent / "README.md").read_text()


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
