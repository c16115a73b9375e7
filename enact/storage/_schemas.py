"""Each named database's schema version: declared by the component whose
actors keep the database, recorded in storage's meta database as
``schema:<database>``, and moved forward by the declared steps at daemon
start.

A database with no record was either written before versions were recorded
(it exists: it is at version 1) or is new (it starts at its current version).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path

import lmdb

from enact.frozen_dataclass import dataclass
from enact.storage._errors import SchemaError
from enact.storage._records import CorruptRecord, decode_document, encode_document

MigrationStep = Callable[[lmdb.Transaction, lmdb._Database], None]
"""Moves one database from version N to N+1: it rewrites that database's
records inside the one write transaction of the whole migration."""

BeforeMigrating = Callable[[Mapping[str, tuple[int, int]]], Path]
"""Takes a backup of the home before any database is migrated, given each
database to migrate and its (recorded, current) versions; returns where the
backup is. Raising stops the start with nothing migrated."""

UNVERSIONED = 1
"""The version of a database written before versions were recorded."""

SCHEMA_PREFIX = b"schema:"


@dataclass(frozen=True, slots=True)
class DatabaseSchema:
    """What this enact reads and writes in one database: its version, and the
    steps from each older version (keyed by the version they start from)."""

    name: str
    version: int = 1
    migrations: Mapping[int, MigrationStep] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError(f"database {self.name}: a schema version starts at 1, not {self.version}")
        missing = [step for step in range(1, self.version) if step not in self.migrations]
        if missing:
            raise ValueError(f"database {self.name}: version {self.version} has no migration from version "
                             f"{missing[0]} to {missing[0] + 1}")
        extra = sorted(step for step in self.migrations if not 1 <= step < self.version)
        if extra:
            raise ValueError(f"database {self.name}: a migration from version {extra[0]} does not lead "
                             f"to version {self.version}")


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What a start migrated: each database's (from, to) versions, and the
    backup taken first (None when nothing needed migrating)."""

    databases: Mapping[str, tuple[int, int]]
    backup: Path | None


def schema_key(database: str) -> bytes:
    return SCHEMA_PREFIX + database.encode()


def encode_version(version: int) -> bytes:
    return encode_document({"version": version}, version=1)


def recorded_versions(txn: lmdb.Transaction, meta: lmdb._Database, where: Path) -> dict[str, int]:
    """Every database's recorded version; a record that cannot be read is a
    SchemaError naming it."""
    versions: dict[str, int] = {}
    cursor = txn.cursor(db=meta)
    if not cursor.set_range(SCHEMA_PREFIX):
        return versions
    for raw_key, raw in cursor:
        key = bytes(raw_key)
        if not key.startswith(SCHEMA_PREFIX):
            break
        name = key[len(SCHEMA_PREFIX):].decode()
        try:
            version = decode_document(bytes(raw), database="storage.meta", key=key).get("version")
        except CorruptRecord as error:
            raise SchemaError(f"the schema record of database {name} in {where} cannot be read: {error}") from None
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SchemaError(f"the schema record of database {name} in {where} is not a version: {version!r}")
        versions[name] = version
    return versions


def newer_than_known(recorded: Mapping[str, int], schemas: Mapping[str, DatabaseSchema], where: Path) -> str | None:
    """The one line refusing a home that has a database newer than this
    enact reads, or None. A database no component declares reads version 1."""
    for name, found in sorted(recorded.items()):
        current = schemas[name].version if name in schemas else 1
        if found > current:
            return (f"database {name} in {where} was written by a newer enact (schema version {found}; "
                    f"this one reads {current}): upgrade enact, or restore a backup taken before the upgrade")
    return None


def database_exists(txn: lmdb.Transaction, name: str) -> bool:
    """Whether the environment holds the named database (its record in the main database)."""
    return txn.get(name.encode()) is not None


def pending(txn: lmdb.Transaction, recorded: Mapping[str, int],
            schemas: Iterable[DatabaseSchema]) -> dict[str, tuple[int, int]]:
    """Each declared database behind its current version: (found, current)."""
    plan: dict[str, tuple[int, int]] = {}
    for schema in schemas:
        found = recorded.get(schema.name)
        if found is None:
            if not database_exists(txn, schema.name):
                continue  # new: recorded at its current version when first granted
            found = UNVERSIONED
        if found < schema.version:
            plan[schema.name] = (found, schema.version)
    return plan
