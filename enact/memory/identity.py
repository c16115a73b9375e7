"""Identities: the body identity that ships with the software, and the
private identity its owner installs.

The private identity (name, pronouns, relationships, personality, mission,
values, care style) is read from TOML or JSON and checked field by field;
the first problem is one line naming the field. The Memory actor stores it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from enact import __version__
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass

# The records are part of the memory protocol, which every memory command
# imports: the parsers' imports wait until something is parsed.

_SHORT = 100
_LONG = 2000
_MAX_ITEMS = 32


class IdentityError(EnactError, ValueError):
    """An identity file that cannot be installed; the message is one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Relationship:
    name: str
    relation: str
    notes: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateIdentity:
    name: str
    pronouns: str = ""
    relationships: tuple[Relationship, ...] = ()
    personality: str = ""
    mission: str = ""
    values: tuple[str, ...] = ()
    care_style: str = ""

    def render(self) -> str:
        lines = [f"Name: {self.name}"]
        if self.pronouns:
            lines.append(f"Pronouns: {self.pronouns}")
        for key, label in (("personality", "Personality"), ("mission", "Mission"), ("care_style", "Care style")):
            value = getattr(self, key)
            if value:
                lines.append(f"{label}: {value}")
        if self.values:
            lines.append("Values: " + "; ".join(self.values))
        for person in self.relationships:
            notes = f" ({person.notes})" if person.notes else ""
            lines.append(f"Relationship: {person.name}, {person.relation}{notes}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyIdentity:
    name: str
    version: str
    lineage: str

    def render(self) -> str:
        return f"Name: {self.name}\nVersion: {self.version}\nLineage: {self.lineage}"


def body_identity() -> BodyIdentity:
    """The software's own identity, from the package's data file."""
    import tomllib
    from importlib import resources

    data = tomllib.loads(resources.files("enact.memory").joinpath("body_identity.toml").read_text("utf-8"))
    return BodyIdentity(name=data["name"], version=__version__, lineage=" ".join(data["lineage"].split()))


def read_identity_file(path: Path) -> PrivateIdentity:
    """Parse and check a private identity file (``.toml`` or ``.json``)."""
    import tomllib

    import orjson

    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise IdentityError(f"{path}: an identity file is .toml or .json")
    from enact.home_guard import HomeRefused, check_owned_file

    try:
        check_owned_file(path)  # what it says becomes part of every prompt: the same rule as config.toml
        raw = path.read_bytes()
    except HomeRefused as error:
        raise IdentityError(str(error)) from None
    except OSError as error:
        raise IdentityError(f"{path}: cannot read it: {error.strerror}") from None
    try:
        data: object = tomllib.loads(raw.decode("utf-8")) if suffix == ".toml" else orjson.loads(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, orjson.JSONDecodeError) as error:
        raise IdentityError(f"{path}: not valid {suffix[1:].upper()}: {error}") from None
    return parse_identity(data)


_FIELDS = ("name", "pronouns", "relationships", "personality", "mission", "values", "care_style")


def parse_identity(data: object) -> PrivateIdentity:
    from enact.credentials import find_credential

    if not isinstance(data, dict):
        raise IdentityError("an identity is a table (TOML) or an object (JSON) of fields")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise IdentityError(f"unknown field {unknown[0]!r}; the fields are {', '.join(_FIELDS)}")
    if "name" not in data:
        raise IdentityError("'name' is required")
    identity = PrivateIdentity(
        name=_text(data, "name", _SHORT, required=True),
        pronouns=_text(data, "pronouns", _SHORT),
        relationships=_relationships(data.get("relationships", [])),
        personality=_text(data, "personality", _LONG),
        mission=_text(data, "mission", _LONG),
        values=_text_list(data, "values"),
        care_style=_text(data, "care_style", _LONG),
    )
    kind = find_credential(identity.render())
    if kind is not None:
        raise IdentityError(f"the identity contains what looks like a credential ({kind}); it is not installed")
    return identity


def _text(data: dict[str, Any], key: str, longest: int, *, required: bool = False, where: str = "") -> str:
    return _checked_text(data.get(key, ""), f"{where}{key!r}", longest, required=required)


def _checked_text(value: object, label: str, longest: int, *, required: bool = False) -> str:
    if not isinstance(value, str):
        raise IdentityError(f"{label} must be text, not {type(value).__name__}")
    value = " ".join(value.split())
    if required and not value:
        raise IdentityError(f"{label} must not be empty")
    if len(value) > longest:
        raise IdentityError(f"{label} is {len(value)} characters; at most {longest}")
    return value


def _text_list(data: dict[str, Any], key: str) -> tuple[str, ...]:
    items = data.get(key, [])
    if not isinstance(items, list):
        raise IdentityError(f"{key!r} must be a list of texts")
    if len(items) > _MAX_ITEMS:
        raise IdentityError(f"{key!r} has {len(items)} items; at most {_MAX_ITEMS}")
    return tuple(_checked_text(item, f"{key}[{n}]", _SHORT * 2, required=True) for n, item in enumerate(items))


def _relationships(items: object) -> tuple[Relationship, ...]:
    if not isinstance(items, list):
        raise IdentityError("'relationships' must be a list of tables with 'name' and 'relation'")
    if len(items) > _MAX_ITEMS:
        raise IdentityError(f"'relationships' has {len(items)} items; at most {_MAX_ITEMS}")
    found = []
    for n, item in enumerate(items):
        where = f"relationships[{n}] "
        if not isinstance(item, dict):
            raise IdentityError(f"{where}must be a table with 'name' and 'relation'")
        extra = sorted(set(item) - {"name", "relation", "notes"})
        if extra:
            raise IdentityError(f"{where}has unknown field {extra[0]!r}; the fields are name, relation, notes")
        found.append(Relationship(
            name=_text(item, "name", _SHORT, required=True, where=where),
            relation=_text(item, "relation", _SHORT, required=True, where=where),
            notes=_text(item, "notes", _LONG, where=where),
        ))
    return tuple(found)
