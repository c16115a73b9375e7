"""``enact backup verify``: a backup is whole when every file the manifest
lists is there with its size and sha256, nothing else is, and every record
of every database of the LMDB copy decodes. The first problem is named in
one line (for a record: its database, its key and why)."""

from __future__ import annotations

from pathlib import Path

from enact.backup.inspection import UnreadableCopy, first_bad_record
from enact.backup.manifest import BackupError, Manifest, checksum, names_under, read_manifest
from enact.frozen_dataclass import dataclass
from enact.home import STATE_DIR

STATE_FILE = f"{STATE_DIR}/data.mdb"
LOCK_FILE = f"{STATE_DIR}/lock.mdb"
"""Made by whoever opens the copy with LMDB's locking on: not part of the backup."""


@dataclass(frozen=True, slots=True)
class Verified:
    manifest: Manifest
    records: int
    """Records read and decoded."""


def verify(backup: Path) -> Verified:
    """Raises BackupError naming the first problem."""
    manifest = read_manifest(backup)
    if STATE_FILE not in manifest.files:
        raise BackupError(f"{backup}: the manifest lists no {STATE_FILE}")
    mismatch = _first_mismatch(backup, manifest)
    state_whole = mismatch is None or not mismatch.startswith(STATE_FILE)
    try:
        bad, records = first_bad_record(backup / STATE_DIR)
    except UnreadableCopy as error:
        raise BackupError(f"{backup}: {mismatch + '; ' if mismatch else ''}{error}") from None
    if bad is not None:
        prefix = "" if state_whole else f"{mismatch}; "
        raise BackupError(f"{backup}: {prefix}{bad}")
    if mismatch is not None:
        raise BackupError(f"{backup}: {mismatch}")
    return Verified(manifest, records)


def _first_mismatch(backup: Path, manifest: Manifest) -> str | None:
    """The first file that is not as the manifest says, in a phrase."""
    for name, expected in sorted(manifest.files.items(), key=lambda item: item[0] != STATE_FILE):
        path = backup / name
        if not path.is_file():
            return f"{name} is missing"
        found = checksum(path)
        if found.size != expected.size:
            return f"{name} is {found.size} bytes, the manifest says {expected.size} (truncated or changed)"
        if found.sha256 != expected.sha256:
            return f"{name} does not match its sha256 in the manifest (changed since the backup)"
    extra = sorted(set(names_under(backup)) - set(manifest.files) - {LOCK_FILE})
    if extra:
        return f"{extra[0]} is not in the manifest"
    return None
