"""The installed skills: ``<home>/skills/<name>/`` holds a skill's files as
they were approved, ``<home>/skills/.records/<name>.json`` where they came
from (source, path, revision), when, by whom and the sha256 of each file.

A skill is written under a ``.partial-`` name and renamed whole, then its
record, so a crash leaves no half-installed skill that looks like one (a
folder without a record is not listed). Both are under ``skills/``, which a
backup keeps.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.safe_files import UnsafeFile, read_inside
from enact.skills.manifest import NAME, SKILL_FILE, Skill, front_matter
from enact.skills.sources import Fetched

SKILLS_DIR = "skills"
RECORDS = ".records"
_PARTIAL = ".partial-"
MAX_BODY = 64 * 1024
"""Characters of a ``SKILL.md`` a read gives the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    name: str
    description: str
    source: str
    path: str
    revision: str
    digests: dict[str, str]
    installed_at: float
    by: str


def skills_dir(home: Path) -> Path:
    return home / SKILLS_DIR


def install(home: Path, skill: Skill, fetched: Fetched, *, at: float, by: str) -> Installed:
    """Write the skill's files and its record, replacing an earlier version."""
    root = skills_dir(home)
    (root / RECORDS).mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = root / f"{_PARTIAL}{skill.name}"
    shutil.rmtree(partial, ignore_errors=True)
    for relative, data in skill.files.items():
        target = partial / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o700 if relative in fetched.folder.executables else 0o600)
    final = root / skill.name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    record = Installed(name=skill.name, description=skill.description, source=fetched.source, path=fetched.path,
                       revision=fetched.revision, digests=dict(skill.digests), installed_at=at, by=by)
    written = root / RECORDS / f"{skill.name}.json.tmp"
    written.write_text(json.dumps(asdict(record), indent=1, sort_keys=True))
    os.replace(written, root / RECORDS / f"{skill.name}.json")
    return record


def installed(home: Path) -> list[Installed]:
    """The installed skills, by name; a folder without a record is left out."""
    records = skills_dir(home) / RECORDS
    if not records.is_dir():
        return []
    found = []
    for entry in sorted(records.glob("*.json")):
        found.append(Installed(**json.loads(entry.read_text())))
    return [record for record in found if (skills_dir(home) / record.name).is_dir()]


def find(home: Path, name: str) -> Installed | None:
    return next((record for record in installed(home) if record.name == name), None) if NAME.match(name) else None


def body(home: Path, name: str) -> str | None:
    """An installed skill's instructions (its ``SKILL.md`` after the front matter)."""
    if find(home, name) is None:
        return None
    try:
        text = read_inside(skills_dir(home) / name, SKILL_FILE, limit=MAX_BODY)
    except UnsafeFile:
        return None
    return None if text is None else front_matter(text)[1]


def remove(home: Path, name: str) -> Installed | None:
    """Remove an installed skill (its record last); None when there is none."""
    found = find(home, name)
    if found is None:
        return None
    shutil.rmtree(skills_dir(home) / name, ignore_errors=True)
    (skills_dir(home) / RECORDS / f"{name}.json").unlink(missing_ok=True)
    return found


def placed(home: Path, cwd: Path, under: str) -> list[str]:
    """Copy the installed skills to ``cwd/under/<name>`` (``under``: where the
    runtime finds a project's skills); the names placed. A skill already
    there (the project's own, or an earlier placement) is replaced only if it
    is one of ours (it carries our marker); one of ours that is no longer
    installed (removed while the daemon was down) is taken out. Nothing is
    placed through a symbolic link: a task's worktree is the task's to write,
    and a link there would lead the copy out of it."""
    root = cwd / under
    if _linked(cwd, under):
        return []
    records = installed(home)
    current = {record.name for record in records}
    stale = [entry.name for entry in root.iterdir() if entry.name not in current and _ours(entry)] \
        if root.is_dir() else []
    if stale:
        withdrawn(cwd, under, stale)
    names = []
    for record in records:
        target = root / record.name
        if target.is_symlink() or (target.exists() and not _ours(target)):
            continue  # the project's own skill of that name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(skills_dir(home) / record.name, target, symlinks=False)
        (target / _MARKER).write_text(record.revision)
        names.append(record.name)
    return names


def withdrawn(cwd: Path, under: str, names: list[str]) -> None:
    """Remove the skills ``placed`` put in ``cwd/under`` (and the folders it
    made for them, once empty), so they are no part of a task's change."""
    if _linked(cwd, under):
        return
    for name in names:
        target = cwd / under / name
        if NAME.match(name) and target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
    folder = cwd / under
    while folder != cwd:
        try:
            folder.rmdir()  # only an empty one: git keeps no empty folder, so none was the project's
        except OSError:
            break
        folder = folder.parent


def _ours(folder: Path) -> bool:
    """A folder ``placed`` made (it carries our marker), not through a link."""
    return folder.is_dir() and not folder.is_symlink() and (folder / _MARKER).is_file()


def _linked(cwd: Path, under: str) -> bool:
    """Whether a folder on the way from ``cwd`` to ``cwd/under`` is a symbolic link or no folder."""
    folder = cwd
    for part in Path(under).parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            return True
    return False


_MARKER = ".enact-skill"
