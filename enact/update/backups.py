"""The backup an update takes before it hands the home to a new release,
made and restored by the running release's own ``enact backup`` (so the
format is always the one that release knows).

Restored only when the new release migrated the home's state: a rollback
otherwise keeps everything the new release accepted while it served.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.update.daemons import last_line, run_enact, serving
from enact.update.releases import Release

BACKUP_TIMEOUT_S = 600.0


class BackupFailed(EnactError):
    """The running release's backup or restore failed; one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backup:
    path: str
    manifest: dict[str, Any]


def take(release: Release, home: Path) -> Backup | None:
    """``enact backup create --json`` of ``release``; None when that release
    has no ``enact backup`` (it predates backups). Raises BackupFailed."""
    done = run_enact(release, home, "backup", "create", "--json", timeout=BACKUP_TIMEOUT_S)
    if done.returncode != 0 and "No such command" in done.stderr:
        return None
    if done.returncode != 0:
        raise BackupFailed(f"the backup failed: {last_line(done)}")
    try:
        manifest = json.loads(done.stdout)
        return Backup(path=str(manifest["path"]), manifest=manifest)
    except (ValueError, KeyError, TypeError):
        raise BackupFailed("the backup printed no manifest with its path") from None


def migrated(backup: Backup, home: Path) -> bool:
    """Whether a database of the home is at another schema version than the
    backup's manifest names for it (the new release migrated it). A database
    the new release added is not a migration: restoring would only lose it."""
    before = backup.manifest.get("schema_versions")
    if not isinstance(before, dict) or not before:
        return False
    after = home_schema_versions(home)
    return any(name in before and before[name] != version for name, version in after.items())


def home_schema_versions(home: Path) -> dict[str, int]:
    """The schema version of each database of ``home``: as the daemon
    serving it reports them, or, with none serving (the new release died),
    as its environment records them (nothing writes it then)."""
    from enact.backup.inspection import UnreadableCopy, copied_facts
    from enact.home import STATE_DIR

    report = serving(home)
    if report is not None and report.storage is not None:
        return {schema.database: schema.version for schema in report.storage.schemas}
    try:
        schemas, _ = copied_facts(home / STATE_DIR)
    except UnreadableCopy:
        return {}
    return schemas


def restore(release: Release, home: Path, backup: Backup) -> None:
    """``enact backup restore PATH`` of ``release``, on a home no daemon
    serves. Raises BackupFailed."""
    done = run_enact(release, home, "backup", "restore", backup.path, timeout=BACKUP_TIMEOUT_S)
    if done.returncode != 0:
        raise BackupFailed(f"the restore of {backup.path} failed: {last_line(done)}")


def restored_line(backup: Backup) -> str:
    """What the owner is told of a restore: that it happened, and what it
    cost (the restore returns the home to the backup, so what either release
    accepted after it was taken is gone)."""
    created = backup.manifest.get("created_at")
    when = time.strftime(" at %H:%M:%S", time.localtime(created)) if isinstance(created, (int, float)) else ""
    return (f"the backup taken before the update{when} was restored, as the new release had migrated the "
            f"home's databases: what was accepted after it is lost ({backup.path})")


