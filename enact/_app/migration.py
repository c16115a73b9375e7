"""Moving a home's databases to this enact's schema versions at start, after
a backup of the home as it was."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from enact import __version__
from enact.storage import MigrationReport, Storage

log = logging.getLogger("enact.daemon")

BACKUPS_DIR = "backups"

BackupBeforeMigrating = Callable[[Path, Storage, Mapping[str, tuple[int, int]]], Path]
"""Backs up ``home`` (whose storage is open) before the given databases are
migrated from and to the given versions; returns the backup's directory."""


def pre_migration_backup(home: Path, storage: Storage, plan: Mapping[str, tuple[int, int]]) -> Path:
    """LMDB's own compacted copy of the environment, in
    ``<home>/backups/pre-migration-<UTC time>/``, beside a ``versions.json``
    saying which schema versions it holds and which migration it preceded."""
    created = time.gmtime()
    destination = _new_directory(home / BACKUPS_DIR, f"pre-migration-{time.strftime('%Y%m%dT%H%M%SZ', created)}")
    storage.copy(destination)
    (destination / "versions.json").write_bytes(orjson.dumps({
        "enact": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", created),
        "schemas": storage.schema_versions(),
        "migrating": {name: {"from": found, "to": current} for name, (found, current) in sorted(plan.items())},
    }, option=orjson.OPT_INDENT_2))
    return destination


def _new_directory(parent: Path, name: str) -> Path:
    """``parent/name``, or ``name-2``, ``-3``... when a start within the same
    second (one whose migration failed) already made it: never overwritten."""
    parent.mkdir(mode=0o700, exist_ok=True)
    for attempt in range(1, 100):
        candidate = parent / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            candidate.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{parent / name} and 98 more like it already exist")


def migrate_home(home: Path, storage: Storage, backup: BackupBeforeMigrating) -> MigrationReport:
    """Migrate what is behind, backed up first; logs one line per database.
    Raises SchemaError (MigrationFailed) or OSError (the backup failed)."""
    report = storage.migrate(lambda plan: backup(home, storage, plan))
    for name, (found, current) in report.databases.items():
        log.info("migrated database %s from schema version %d to %d (backup before it: %s)",
                 name, found, current, report.backup)
    return report
