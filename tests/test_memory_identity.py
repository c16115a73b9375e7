"""Identities: the shipped body identity and the owner's private identity file."""

from __future__ import annotations

from pathlib import Path

import pytest

from enact import __version__
from enact.memory.identity import IdentityError, Relationship, body_identity, parse_identity, read_identity_file

TOML = """
name = "Ada"
pronouns = "she/her"
personality = "warm, direct"
mission = "help the owner keep their projects moving"
values = ["honesty", "patience"]
care_style = "check in gently when a deadline nears"

[[relationships]]
name = "Maya"
relation = "the owner's sister"
"""


def test_the_body_identity_ships_with_the_package_and_carries_the_version() -> None:
    body = body_identity()
    assert body.name == "enact" and body.version == __version__
    assert "Enoch" in body.lineage and f"Version: {__version__}" in body.render()


def test_a_toml_identity_is_read_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "me.toml"
    path.write_text(TOML)
    identity = read_identity_file(path)
    assert identity.name == "Ada" and identity.values == ("honesty", "patience")
    assert identity.relationships == (Relationship(name="Maya", relation="the owner's sister"),)
    assert "Relationship: Maya, the owner's sister" in identity.render()


def test_a_json_identity_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "me.json"
    path.write_text('{"name": "Ada", "care_style": "gentle"}')
    assert read_identity_file(path).care_style == "gentle"


@pytest.mark.parametrize(("data", "error"), [
    ({}, "'name' is required"),
    ({"name": "  "}, "'name' must not be empty"),
    ({"name": 3}, "'name' must be text, not int"),
    ({"name": "A", "colour": "blue"}, "unknown field 'colour'"),
    ({"name": "A", "values": "honesty"}, "'values' must be a list of texts"),
    ({"name": "A", "values": ["ok", ""]}, "values[1] must not be empty"),
    ({"name": "A", "mission": "m" * 2001}, "'mission' is 2001 characters; at most 2000"),
    ({"name": "A", "relationships": [{"name": "Maya"}]}, "relationships[0] 'relation' must not be empty"),
    ({"name": "A", "relationships": [{"name": "M", "relation": "r", "age": 3}]}, "unknown field 'age'"),
    ({"name": "A", "mission": "my token is ghp_" + "a" * 36}, "looks like a credential"),
])
def test_a_bad_field_is_refused_in_one_line_naming_it(data: dict[str, object], error: str) -> None:
    with pytest.raises(IdentityError) as raised:
        parse_identity(data)
    assert error in str(raised.value) and "\n" not in str(raised.value)


def test_a_credential_is_never_repeated_in_the_refusal() -> None:
    with pytest.raises(IdentityError) as raised:
        parse_identity({"name": "A", "mission": "ghp_" + "b" * 36})
    assert "ghp_" not in str(raised.value)


@pytest.mark.parametrize(("name", "content", "error"), [
    ("me.yaml", "name: A", "is .toml or .json"),
    ("me.toml", "name = ", "not valid TOML"),
    ("me.json", "{", "not valid JSON"),
])
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, name: str, content: str, error: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(IdentityError, match=error):
        read_identity_file(path)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="cannot read it"):
        read_identity_file(tmp_path / "absent.toml")
