"""``enact home export|verify|import``: a home carried to another host as
one archive file.

The archive is a tar file (gzip-compressed when its name ends in ``.gz``
or ``.tgz``), mode 0600, holding ``archive.json`` (its own format and
version) and ``backup/``: an ordinary backup (``enact.backup.snapshot``)
with its manifest, whose checksums let the new host verify it before it
trusts it. An import verifies the whole archive, lays it down in an empty
home as a restore would (a new generation above the archived one, the
memory index rebuilt at the first start), gives the home a new home id
(two homes never share one, so they never name the same task branch) and
drops the native runtime sessions, which stay on the old host.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import lmdb
import orjson

from enact.backup.manifest import BackupError, Manifest, formatted
from enact.backup.moved import Moved, mark_moved
from enact.backup.restore import restore
from enact.backup.snapshot import HOME_ID_NAME, Backup, create_stopped
from enact.backup.verify import Verified, verify
from enact.frozen_dataclass import dataclass
from enact.home import STATE_DIR
from enact.storage import Storage

FORMAT = "enact-home-archive"
FORMAT_VERSION = 1
HEADER_NAME = "archive.json"
BACKUP_DIR = "backup"


class HomeNotEmpty(BackupError):
    """An import is only into a home with nothing in it."""


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path
    manifest: Manifest
    moved: Moved | None


@dataclass(frozen=True, slots=True)
class Imported:
    manifest: Manifest
    generation: int
    home_id: str
    native_sessions_dropped: int


# -- writing ------------------------------------------------------------------


def pack(backup: Backup, file: Path) -> Path:
    """Write the archive of ``backup`` to ``file``, whole or not at all."""
    file = file.expanduser().absolute()
    now = time.time()
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "created_at": now,
              "home_id": backup.manifest.home_id, "generation": backup.manifest.generation}
    draft = file.with_name(f".{file.name}.partial-{os.getpid()}")
    mode = "w:gz" if file.name.endswith((".gz", ".tgz")) else "w"
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as raw, tarfile.open(fileobj=raw, mode=mode) as tar:  # type: ignore[call-overload]
            encoded = orjson.dumps(header, option=orjson.OPT_INDENT_2)
            member = tarfile.TarInfo(HEADER_NAME)
            member.size, member.mode, member.mtime = len(encoded), 0o600, int(now)
            tar.addfile(member, io.BytesIO(encoded))
            tar.add(backup.path, arcname=BACKUP_DIR)
            tar.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(draft, file)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            draft.unlink()
        raise
    return file


@contextlib.contextmanager
def scratch_beside(file: Path) -> Iterator[Path]:
    """A private directory beside ``file`` (its file system: no copy across
    disks) for the backup an export packs, removed afterwards."""
    file.expanduser().absolute().parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".enact-export-", dir=file.expanduser().absolute().parent) as where:
        yield Path(where)


def export_stopped(home: Path, file: Path, *, include_secrets: bool, move: bool) -> Exported:
    """Export a home no daemon runs on, holding its lock throughout; with
    ``move``, mark it moved before the lock is let go, so no daemon starts
    on it between the export and the mark. Raises DaemonRunning."""
    marked: list[Moved] = []

    def then(backup: Backup) -> None:
        written = pack(backup, file)
        if move:
            marked.append(Moved(archive=str(written), moved_at=time.time()))
            mark_moved(home, marked[0])

    with scratch_beside(file) as scratch:
        made = create_stopped(home, reason="export", include_secrets=include_secrets, to=scratch, then=then)
    return Exported(file.expanduser().absolute(), made.manifest, marked[0] if marked else None)


# -- reading ------------------------------------------------------------------


@contextlib.contextmanager
def opened(file: Path) -> Iterator[Path]:
    """The archive's backup, extracted into a private temporary directory.
    Raises BackupError (one line) for a file that is not an archive of this
    format, or whose members reach outside it."""
    if not file.is_file():
        raise BackupError(f"{file} is not an archive: no such file")
    with tempfile.TemporaryDirectory(prefix="enact-import-") as where:
        root = Path(where)
        try:
            with tarfile.open(file, mode="r:*") as tar:
                tar.extractall(root, filter="data")
        except (tarfile.TarError, EOFError, OSError, ValueError) as error:
            raise BackupError(f"{file} cannot be read as an archive: {error}") from None
        _check_header(file, root / HEADER_NAME)
        yield root / BACKUP_DIR


def _check_header(file: Path, header: Path) -> None:
    try:
        raw = header.read_bytes()
    except FileNotFoundError:
        raise BackupError(f"{file} is not an enact home archive: it has no {HEADER_NAME}") from None
    formatted(raw, f"{file}: {HEADER_NAME}", kind="an enact home archive's header", form=FORMAT, version=FORMAT_VERSION)


def verify_archive(file: Path) -> Verified:
    """As ``enact backup verify``, on the archive's backup; raises
    BackupError naming the first problem (paths inside the archive)."""
    with opened(file) as backup:
        try:
            return verify(backup)
        except BackupError as error:
            raise BackupError(str(error).replace(str(backup), f"{file}:{BACKUP_DIR}")) from None


def import_home(file: Path, home: Path) -> Imported:
    """Lay the archive down in ``home``, which must be empty or absent.
    Raises HomeNotEmpty or BackupError before anything is written."""
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise HomeNotEmpty(f"{home} is not empty; an archive is imported into an empty home only")
    with opened(file) as backup:
        try:
            restored = restore(home, backup)
        except BackupError as error:
            raise BackupError(str(error).replace(str(backup), f"{file}:{BACKUP_DIR}")) from None
    (home / HOME_ID_NAME).unlink(missing_ok=True)
    from enact.tasks.task_branches import home_id

    dropped = drop_native_sessions(home / STATE_DIR)
    return Imported(manifest=restored.manifest, generation=restored.generation, home_id=home_id(home),
                    native_sessions_dropped=dropped)


def drop_native_sessions(state: Path) -> int:
    """Forget every runtime session whose history lives on the old host (a
    Codex or Claude Code session; an ``openai`` session's history is in the
    state and moves with it): the first turn of its conversation here starts
    a fresh session with the startup context. Returns how many were dropped."""
    from enact.chat.sessions_actor import HISTORIES, SESSIONS

    storage = Storage(state)
    try:
        store = storage.grant("home-import", [SESSIONS, HISTORIES])
        sessions, histories = store.table(SESSIONS), store.table(HISTORIES)

        def drop(txn: lmdb.Transaction) -> int:
            kept = {document["native_id"] for _, document in histories.items(txn)}
            native = [key for key, document in sessions.items(txn) if document["native_id"] not in kept]
            for key in native:
                sessions.delete(txn, key)
            return len(native)

        return store.write(drop, fenced=False)
    finally:
        storage.close()
