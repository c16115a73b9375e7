"""Reading a skill folder from where the owner points: a local folder, or a
path at a revision of a git repository. Nothing of it is run.

A git source is fetched into a private bare mirror (``<home>/skill-sources``,
one per source, outside what a backup keeps) through ``enact.tasks.host_git``
(no hook, no system configuration, never the ``ext::`` transport), the
revision resolved to its commit, and the folder read from that commit's tree
as an archive: the working files of the repository are never checked out.

Either way a symbolic link is followed only to a file inside the folder
(its content then stands at the link's path); a link leading out of the
folder, to a directory or to nothing is a problem named with its target. A
file over the per-file limit is named and not read; reading stops past the
file-count limit.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import stat
import tarfile
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.safe_files import UnsafeFile, read_bytes_inside
from enact.skills.manifest import SkillFiles, SkillRefused, revision_of
from enact.skills.settings import SkillLimits
from enact.tasks.host_git import WorktreeError, git

MIRRORS_DIR = "skill-sources"
_NO_EXT = ("-c", "protocol.ext.allow=never")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    """A skill folder read from its source, at an exact revision."""

    source: str
    path: str
    revision: str
    """The git commit, or ``sha256:…`` of a local folder's content."""
    folder: SkillFiles


def read_local(folder: Path, limits: SkillLimits) -> Fetched:
    """A local folder, read without following any link out of it."""
    if not folder.is_dir():
        raise SkillRefused(f"{folder} is not a folder")
    root = folder.resolve()
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    problems: list[str] = []
    links: dict[str, str] = {}
    for relative in _walk(root, problems, limits.max_files):
        full = root / relative
        status = full.lstat()
        if stat.S_ISLNK(status.st_mode):
            links[relative] = os.readlink(full)
        elif not stat.S_ISREG(status.st_mode):
            problems.append(f"{relative} is not a regular file")
        elif status.st_size > limits.max_file_bytes:
            problems.append(f"{relative} is {status.st_size} bytes; at most {limits.max_file_bytes} a file")
        else:
            try:
                data = read_bytes_inside(root, relative, limit=limits.max_file_bytes)
            except UnsafeFile as error:
                problems.append(str(error))
                continue
            files[relative] = data or b""
            if status.st_mode & 0o111:
                executables.add(relative)
    _follow_links(links, files, executables, problems)
    return Fetched(source=str(root), path="", revision=revision_of(files),
                   folder=SkillFiles(files=files, executables=frozenset(executables), problems=tuple(problems)))


def _walk(root: Path, problems: list[str], max_files: int) -> list[str]:
    found: list[str] = []
    pending = [""]
    while pending:
        prefix = pending.pop()
        with os.scandir(root / prefix if prefix else root) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                relative = f"{prefix}/{entry.name}" if prefix else entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append(relative)
                    continue
                found.append(relative)
                if len(found) > max_files:
                    problems.append(f"it holds more than {max_files} files")
                    return found[:max_files]
    return found


def _follow_links(links: dict[str, str], files: dict[str, bytes], executables: set[str],
                  problems: list[str]) -> None:
    """A link to a file of the folder stands for that file; any other is a problem."""
    for path, target in sorted(links.items()):
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if posixpath.isabs(target) or inside == ".." or inside.startswith("../"):
            problems.append(f"{path} is a symbolic link leading out of the folder (to {target})")
        elif inside not in files:
            problems.append(f"{path} is a symbolic link to {target}, which is no file of the folder")
        else:
            files[path] = files[inside]
            if inside in executables:
                executables.add(path)


def mirror_of(mirrors: Path, source: str) -> Path:
    return mirrors / (hashlib.sha256(source.encode()).hexdigest()[:16] + ".git")


def fetch_git(source: str, path: str, revision: str, *, mirrors: Path, limits: SkillLimits,
              fetch: bool = True) -> Fetched:
    """``path`` at ``revision`` of the git repository ``source`` (a path or a
    URL the owner's git can fetch), through a private mirror. ``fetch``
    False: a commit the mirror already holds is read without asking the
    source again (an approval installs what was assessed, without waiting
    on the network)."""
    if source.startswith("-") or revision.startswith("-"):
        raise SkillRefused("a source or revision may not start with '-'")
    path = posixpath.normpath(path.strip("/")) if path.strip("/") else "."
    if path == ".." or path.startswith("../"):
        raise SkillRefused(f"the path {path} leads out of the repository")
    mirror = mirror_of(mirrors, source)
    try:
        if not mirror.exists():
            mirror.mkdir(parents=True, mode=0o700)
            git(mirror, "init", "--quiet", "--bare")
        commit = _held(mirror, revision) if not fetch else ""
        if not commit:
            git(mirror, "fetch", "--quiet", "--no-tags", "--prune", "--end-of-options", source,
                "+HEAD:refs/learn/HEAD", "+refs/heads/*:refs/learn/heads/*", "+refs/tags/*:refs/learn/tags/*",
                options=_NO_EXT)
            commit = _resolve(mirror, revision)
        tree = f"{commit}:{path}" if path != "." else f"{commit}^{{tree}}"
        if git(mirror, "cat-file", "-t", tree).strip() != "tree":
            raise SkillRefused(f"{path} is not a folder at {commit[:12]}")
        archive = _archive(mirror, tree)
    except WorktreeError as error:
        raise SkillRefused(f"the repository could not be read: {error}") from None
    return Fetched(source=source, path="" if path == "." else path, revision=commit,
                   folder=_from_tar(archive, limits))


def _resolve(mirror: Path, revision: str) -> str:
    for name in (revision, f"refs/learn/heads/{revision}", f"refs/learn/tags/{revision}", f"refs/learn/{revision}"):
        try:
            return git(mirror, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}").strip()
        except WorktreeError:
            continue
    raise SkillRefused(f"no revision {revision} in the repository")


def _held(mirror: Path, commit: str) -> str:
    """``commit`` if it is a full commit id the mirror holds, else ""."""
    if len(commit) != 40:
        return ""
    try:
        return git(mirror, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}").strip()
    except WorktreeError:
        return ""


def _archive(mirror: Path, tree: str) -> bytes:
    target = mirror / "learn.tar"
    try:
        git(mirror, "archive", "--format=tar", "-o", str(target), tree)
        return target.read_bytes()
    finally:
        target.unlink(missing_ok=True)


def _from_tar(archive: bytes, limits: SkillLimits) -> SkillFiles:
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    problems: list[str] = []
    links: dict[str, str] = {}
    count = 0
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isdir() or member.type == tarfile.XGLTYPE:
                continue
            count += 1
            if count > limits.max_files:
                problems.append(f"it holds more than {limits.max_files} files")
                break
            name = member.name
            if member.issym():
                links[name] = member.linkname
            elif not member.isfile():
                problems.append(f"{name} is not a regular file")
            elif member.size > limits.max_file_bytes:
                problems.append(f"{name} is {member.size} bytes; at most {limits.max_file_bytes} a file")
            else:
                extracted = tar.extractfile(member)
                files[name] = extracted.read() if extracted is not None else b""
                if member.mode & 0o111:
                    executables.add(name)
    _follow_links(links, files, executables, problems)
    return SkillFiles(files=files, executables=frozenset(executables), problems=tuple(problems))
