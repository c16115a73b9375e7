"""A repository's own settings for enact (``.enact.toml`` at its root),
always read from a revision: a task's base, a land's target. Never from a
worktree: the change the doctor checks must neither choose that doctor nor
what is protected from it.

```toml
[doctor]
command = "make check"   # what validates a change (run by sh -c)
timeout = 600            # seconds

[tasks]
protected = ["docs/api/", "schema.sql"]   # beside tasks.protected_paths
```

Files are read with ``git ls-tree`` (kind and size first) and ``git
cat-file``, so a symlink, a directory or an oversized file in the history
is refused before any of it is read.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from enact.config import checked
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.tasks.host_git import WorktreeError, git
from enact.tasks.settings import DOCTOR_TIMEOUT

REPO_CONFIG = ".enact.toml"
MAX_CONFIG_BYTES = 64 * 1024


class RepoConfigError(EnactError, ValueError):
    """The repository's ``.enact.toml`` cannot be used; one line naming it."""


class FileTooLarge(RepoConfigError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoConfig:
    revision: str
    doctor_command: str | None = None
    doctor_timeout_s: float | None = None
    protected: tuple[str, ...] = ()
    """What the repository protects beside ``tasks.protected_paths``."""


def blob_at(repo: Path, revision: str, path: str, *, limit: int) -> str | None:
    """The text of ``path`` at ``revision``, None when it is not there.
    Raises FileTooLarge past ``limit`` bytes and RepoConfigError for what
    is not a regular file (a symlink, a directory, a submodule)."""
    try:
        listed = git(repo, "ls-tree", "-l", "-z", revision, "--", path)
    except WorktreeError as error:
        raise RepoConfigError(f"{path} at {revision[:12]} cannot be listed: {error}") from None
    entry = listed.split("\0", 1)[0]
    if not entry:
        return None
    meta, _, _ = entry.partition("\t")
    mode, kind, sha, size = meta.split()
    if kind != "blob" or mode == "120000":
        raise RepoConfigError(f"{path} at {revision[:12]} is not a regular file")
    if int(size) > limit:
        raise FileTooLarge(f"{path} at {revision[:12]} is {int(size)} bytes; at most {limit} are read")
    return git(repo, "cat-file", "blob", sha)


def root_names_at(repo: Path, revision: str) -> list[str]:
    """The names at the root of ``revision`` (files and directories)."""
    return [name for name in git(repo, "ls-tree", "--name-only", "-z", revision).split("\0") if name]


def read_at(repo: Path, revision: str) -> RepoConfig:
    """``.enact.toml`` as it is at ``revision`` (empty settings when it has none)."""
    text = blob_at(repo, revision, REPO_CONFIG, limit=MAX_CONFIG_BYTES)
    return RepoConfig(revision=revision) if text is None else parse(text, revision=revision)


def parse(text: str, *, revision: str = "") -> RepoConfig:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RepoConfigError(f"{REPO_CONFIG} cannot be read: {error}") from None
    doctor, tasks = document.get("doctor", {}), document.get("tasks", {})
    if not isinstance(doctor, dict) or not isinstance(tasks, dict):
        raise RepoConfigError(f"{REPO_CONFIG}: [doctor] and [tasks] must be tables")
    command, timeout = doctor.get("command"), doctor.get("timeout")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise RepoConfigError(f"{REPO_CONFIG}: [doctor] command must be a non-empty string")
    if timeout is not None:
        # The same range as tasks.doctor_timeout_s, from its declaration.
        timeout, problem = checked(DOCTOR_TIMEOUT, timeout)
        if problem:
            raise RepoConfigError(f"{REPO_CONFIG}: [doctor] timeout (seconds) {problem}")
    protected = tasks.get("protected", [])
    if not isinstance(protected, list) or not all(isinstance(item, str) and item.strip() for item in protected):
        raise RepoConfigError(f"{REPO_CONFIG}: [tasks] protected must be a list of paths")
    return RepoConfig(revision=revision, doctor_command=command,
                      doctor_timeout_s=None if timeout is None else float(timeout), protected=tuple(protected))
