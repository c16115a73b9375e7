"""A backup's manifest (``manifest.json``): what made it, what it holds,
and the checksum of every file, by which ``verify`` knows it whole."""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

import orjson

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass

MANIFEST_NAME = "manifest.json"
FORMAT = "enact-backup"
FORMAT_VERSION = 1
_CHUNK = 1 << 20


class BackupError(EnactError, ValueError):
    """A backup that cannot be made, read or restored; the message is one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileEntry:
    sha256: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    enact_version: str
    schema_versions: dict[str, int]
    """Each schema's version, by name, as the copied environment records them."""
    generation: int
    """The fence generation the copied environment had."""
    home_id: str | None
    created_at: float
    reason: str
    """Why it was taken: ``cli``, ``schedule``, or the caller's (``migration``)."""
    include_secrets: bool
    left_out: list[str]
    """What was not copied, each in a line: the secrets, the derived data."""
    outside: dict[str, str] = field(default_factory=dict)
    """Files from outside the home: the name in the backup -> where it was."""
    due: float | None = None
    """The due time a scheduled backup was taken for."""
    files: dict[str, FileEntry] = field(default_factory=dict)
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def checksum(path: Path) -> FileEntry:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return FileEntry(sha256=digest.hexdigest(), size=path.stat().st_size)


def names_under(root: Path) -> list[str]:
    """Every file under ``root`` but the manifest, by its path relative to it."""
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            relative = (Path(directory) / name).relative_to(root).as_posix()
            if relative != MANIFEST_NAME:
                found.append(relative)
    return sorted(found)


def files_under(root: Path) -> dict[str, FileEntry]:
    """Every file under ``root`` but the manifest, with its checksum."""
    return {name: checksum(root / name) for name in names_under(root)}


def write_manifest(backup: Path, manifest: Manifest) -> None:
    path = backup / MANIFEST_NAME
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(orjson.dumps(manifest.to_json(), option=orjson.OPT_INDENT_2))
        file.flush()
        os.fsync(file.fileno())


def formatted(raw: bytes, path: Path | str, *, kind: str, form: str, version: int) -> dict[str, Any]:
    """The JSON object in ``raw`` if it names format ``form`` at ``version``;
    else BackupError, one line saying what ``path`` is not."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise BackupError(f"{path} does not parse: {error}") from None
    if not isinstance(data, dict) or data.get("format") != form:
        raise BackupError(f"{path} is not {kind} (no format {form!r})")
    if data.get("format_version") != version:
        raise BackupError(f"{path} is format version {data.get('format_version')!r}; "
                          f"this enact reads version {version}")
    return data


def read_manifest(backup: Path) -> Manifest:
    """The manifest of the backup in ``backup``; BackupError, one line, when
    it is not an enact backup this code reads."""
    path = backup / MANIFEST_NAME
    if not backup.is_dir():
        raise BackupError(f"{backup} is not a backup: not a directory")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BackupError(f"{backup} is not a backup: it has no {MANIFEST_NAME}") from None
    except OSError as error:
        raise BackupError(f"{path} cannot be read: {error.strerror}") from None
    data = formatted(raw, path, kind="an enact backup's manifest", form=FORMAT, version=FORMAT_VERSION)
    try:
        files = {str(name): FileEntry(**entry) for name, entry in data.pop("files").items()}
        return Manifest(**data, files=files)
    except (KeyError, TypeError, AttributeError) as error:
        raise BackupError(f"{path} is missing or has a wrong field: {error}") from None
