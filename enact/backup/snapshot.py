"""Taking a backup (``create``), listing them and keeping ``backup.keep``.

A backup is a directory named by its UTC time (names sort as times do),
mode 0700, its files 0600: ``state/data.mdb`` (LMDB's own compacted copy,
made from one read transaction, so a running daemon goes on writing), the
home's files under ``home/`` (``config.toml`` with its secrets left out,
``commands.toml``, the scripted rules, ``home-id``, ``skills/``), files from
outside the home under ``outside/``, and ``manifest.json``. It is written
under a ``.partial-`` name and renamed whole, so a crash leaves no
half-backup that looks like one. The memory index is derived data: left
out, rebuilt from LMDB.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import lmdb

from enact import __version__
from enact.backup.inspection import copied_facts
from enact.backup.manifest import BackupError, Manifest, files_under, read_manifest, write_manifest
from enact.backup.secrets import redact_config, secret_files, secret_keys
from enact.backup.settings import BackupSettings
from enact.config import Config
from enact.frozen_dataclass import dataclass
from enact.home import COMMANDS_NAME, CONFIG_NAME, LOCK_NAME, SCRIPTED_RULES_NAME, STATE_DIR
from enact.storage import Storage, Store

SKILLS_DIR = "skills"
HOME_ID_NAME = "home-id"
"""As ``enact.tasks.task_branches.HOME_ID_FILE``."""
PARTIAL = ".partial-"
DERIVED = "the memory index (memory-index/): derived data, rebuilt from the state at the next start"


class DaemonRunning(BackupError):
    """The home's lock is held: the running daemon must take the backup."""


@dataclass(frozen=True, slots=True)
class Backup:
    path: Path
    manifest: Manifest


def name_of(moment: float) -> str:
    """A backup's directory name: its UTC time, to the microsecond."""
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def load_settings(home: Path) -> Config:
    from enact import components

    return components.load().load_config(home)


def create(home: Path, source: Storage | Store | lmdb.Environment, *, reason: str, include_secrets: bool = False,
           settings: Config | None = None, to: Path | None = None, now: float | None = None,
           due: float | None = None) -> Backup:
    """A backup of ``home`` whose LMDB environment ``source`` is open (the
    daemon's storage, any store of it, or an environment the caller holds
    the home's lock for), written to ``to`` or ``backup.dir``; then, in
    ``backup.dir``, only the newest ``backup.keep`` are kept. ``due``: the
    scheduled due time it is for, which names it, so that a due time run
    again finds its backup instead of taking a second."""
    settings = settings if settings is not None else load_settings(home)
    own = settings.typed(BackupSettings)
    directory = (to or own.directory).expanduser().absolute()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    moment = time.time() if now is None else now
    name = name_of(due if due is not None else moment)
    final = directory / name
    if due is not None and (final / "manifest.json").exists():
        return Backup(final, read_manifest(final))
    partial = directory / (PARTIAL + name)
    shutil.rmtree(partial, ignore_errors=True)  # left by a crash during this same backup
    partial.mkdir(mode=0o700)
    try:
        (partial / STATE_DIR).mkdir(mode=0o700)
        if isinstance(source, lmdb.Environment):
            source.copy(str(partial / STATE_DIR), compact=True)
        else:
            source.copy_to(partial / STATE_DIR)
        left_out, outside = _copy_files(home, settings, partial, include_secrets=include_secrets)
        schemas, generation = copied_facts(partial / STATE_DIR)
        manifest = Manifest(
            enact_version=__version__, schema_versions=schemas, generation=generation,
            home_id=_home_id(home), created_at=moment, reason=reason, include_secrets=include_secrets,
            left_out=[*left_out, DERIVED], outside=outside, due=due,
            files=files_under(partial))
        for path in partial.rglob("*"):
            path.chmod(0o700 if path.is_dir() else 0o600)
        write_manifest(partial, manifest)
        os.rename(partial, final if not final.exists() else directory / f"{name}-{os.getpid()}")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if directory == own.directory.expanduser().absolute():
        prune(directory, own.keep)
    return Backup(final, manifest)


def _home_id(home: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return (home / HOME_ID_NAME).read_text(encoding="ascii").strip() or None
    return None


def _copy_files(home: Path, settings: Config, backup: Path, *,
                include_secrets: bool) -> tuple[list[str], dict[str, str]]:
    """The home's files into ``backup``; returns what was left out, and
    the files from outside the home (their name in the backup -> where)."""
    lines: list[str] = []
    outside: dict[str, str] = {}
    files = backup / "home"
    files.mkdir(mode=0o700)
    config_path = home / CONFIG_NAME
    if config_path.is_file():
        text = config_path.read_text(encoding="utf-8")
        if not include_secrets:
            redacted = redact_config(text, secret_keys(settings.settings))
            text, lines = redacted.text, redacted.left_out
        (files / CONFIG_NAME).write_text(text, encoding="utf-8")
    rules = str(settings.values.get("scripted.rules") or "")
    rules_path = Path(rules).expanduser() if rules else home / SCRIPTED_RULES_NAME
    for path in (home / COMMANDS_NAME, rules_path, home / HOME_ID_NAME):
        if path.is_file():
            _copy_one(home, path, backup, outside)
    if (home / SKILLS_DIR).is_dir():
        shutil.copytree(home / SKILLS_DIR, files / SKILLS_DIR, symlinks=True)
    for key, where in secret_files(settings).items():
        path = Path(where).expanduser()
        if not include_secrets:
            lines.append(f"{key}: the file {path} (a secret)")
        elif path.is_file():
            _copy_one(home, path, backup, outside)
    return lines, outside


def _copy_one(home: Path, path: Path, backup: Path, outside: dict[str, str]) -> None:
    absolute = path.absolute()
    if absolute.is_relative_to(home.absolute()):
        target = backup / "home" / absolute.relative_to(home.absolute())
    else:
        target = backup / "outside" / f"{len(outside)}-{absolute.name}"
        outside[target.relative_to(backup).as_posix()] = str(absolute)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copyfile(absolute, target)


# -- the home's lock, when no daemon runs ------------------------------------


@contextlib.contextmanager
def home_locked(home: Path) -> Iterator[None]:
    """Hold the home's lock, as a daemon does: none can start meanwhile.
    Raises DaemonRunning when one holds it."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(home / LOCK_NAME, "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DaemonRunning(f"enact is running on {home}") from None
        yield


def create_stopped(home: Path, *, reason: str, include_secrets: bool = False, to: Path | None = None,
                   then: Callable[[Backup], None] | None = None) -> Backup:
    """``create`` with no daemon running: this process holds the home's lock,
    until ``then`` (if given) has done with the backup (a move marks the home
    moved before a daemon can start on it)."""
    settings = load_settings(home)
    with home_locked(home):
        state = home / STATE_DIR
        if not (state / "data.mdb").is_file():
            raise BackupError(f"{home} has no state to back up ({state} is empty)")
        environment = lmdb.open(str(state), readonly=True, subdir=True)
        try:
            made = create(home, environment, reason=reason, include_secrets=include_secrets, settings=settings,
                          to=to)
        finally:
            environment.close()
        if then is not None:
            then(made)
        return made


# -- listing and retention --------------------------------------------------------


def backups_in(directory: Path) -> list[Backup]:
    """The backups in ``directory`` (those with a manifest this code reads), oldest first."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for path in sorted(directory.iterdir()):
            if path.name.startswith(PARTIAL) or not path.is_dir():
                continue
            with contextlib.suppress(BackupError):
                found.append(Backup(path, read_manifest(path)))
    return found


def prune(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` backups (by name: their time);
    a directory without a valid manifest is never touched."""
    backups = backups_in(directory)
    doomed = [backup.path for backup in backups[:max(0, len(backups) - keep)]]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
