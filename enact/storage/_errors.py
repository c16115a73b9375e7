"""Storage's failures, and how a full disk is told from other LMDB errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import lmdb

from enact.errors import EnactError


class StorageError(EnactError, RuntimeError):
    pass


class SchemaError(StorageError):
    """The home was written by a schema this code cannot use."""


class MigrationFailed(SchemaError):
    """A migration step raised: its transaction was aborted, nothing changed."""


class OwnershipError(StorageError):
    """An actor asked for a database it does not own."""


class GroupInterrupted(StorageError):
    """The commit this batch shared was cut short by a BaseException (an
    interrupt, an exit) raised in one of the group's writes; the leading
    thread, which ran that write, raises the BaseException itself."""


class DiskFull(StorageError):
    """A write that cannot be made durable for want of space: nothing of it
    was committed. Its message is the one line the owner sees."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the disk is full: {path} has no room to commit the write, so it was not saved; "
                         "free some space and try again")


_NO_SPACE = ("No space left on device", "Disk quota exceeded")
_LOW_SPACE_BYTES = 1 << 20


def _is_disk_full(error: lmdb.Error, path: Path) -> bool:
    """LMDB names the OS error only in its message. A full disk can also
    surface as "Input/output error" (a write-back of its pages that failed):
    with next to no room left on the file system, that is the disk being
    full too."""
    text = str(error)
    if any(reason in text for reason in _NO_SPACE):
        return True
    if "Input/output error" not in text:
        return False
    try:
        return shutil.disk_usage(path).free < _LOW_SPACE_BYTES
    except OSError:
        return False
