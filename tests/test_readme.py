"""The README is the user's manual: it must not drift from the code."""

from __future__ import annotations

from pathlib import Path

from enact.cli import main
from enact.config import SETTINGS

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_documents_every_setting_and_its_variable() -> None:
    for setting in SETTINGS:
        assert f"`{setting.key}`" in README, setting.key
        assert f"`{setting.env_name}`" in README, setting.env_name


def test_readme_lists_every_top_level_command() -> None:
    for name in main.commands:
        assert f"`enact {name}" in README, name


def test_readme_shows_the_two_commands() -> None:
    assert "make run" in README and "make test" in README
