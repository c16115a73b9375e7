"""Moving a home's databases to this enact's schema versions at start, after
a backup of the home as it was."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from enact.storage import MigrationReport, Storage

log = logging.getLogger("enact.daemon")

BackupBeforeMigrating = Callable[[Path, Storage, Mapping[str, tuple[int, int]]], Path]
"""Backs up ``home`` (whose storage is open) before the given databases are
migrated from and to the given versions; returns the backup's directory."""

PRE_MIGRATION = "pre-migration"
"""The reason a backup taken before a migration gives in its manifest."""


def pre_migration_backup(home: Path, storage: Storage, plan: Mapping[str, tuple[int, int]]) -> Path:
    """An ordinary backup (``enact backup``'s, in ``backup.dir``) whose
    manifest's reason names each database to migrate, from and to which
    version; its schema versions are the ones before the migration."""
    from enact.backup import snapshot
    from enact.backup.manifest import BackupError

    steps = ", ".join(f"{name} {found} to {current}" for name, (found, current) in sorted(plan.items()))
    try:
        return snapshot.create(home, storage, reason=f"{PRE_MIGRATION}: {steps}").path
    except BackupError as error:  # the start says it could not back up, as for a failed write
        raise OSError(str(error)) from None


def migrate_home(home: Path, storage: Storage, backup: BackupBeforeMigrating) -> MigrationReport:
    """Migrate what is behind, backed up first; logs one line per database.
    Raises SchemaError (MigrationFailed) or OSError (the backup failed)."""
    report = storage.migrate(lambda plan: backup(home, storage, plan))
    for name, (found, current) in report.databases.items():
        log.info("migrated database %s from schema version %d to %d (backup before it: %s)",
                 name, found, current, report.backup)
    return report
