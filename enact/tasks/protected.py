"""Which paths a task may change: everything but what guards the checks of
the change (its tests, its CI, what configures the test run, the doctor's
own ``.enact.toml``), unless the owner unlocked it for the task.

What is protected comes from ``tasks.protected_paths`` plus the
repository's ``[tasks] protected`` in ``.enact.toml`` at the task's base
(``enact.tasks.repo_config``), never from the worktree. A pattern ending in
``/`` is a directory at the root; one without ``/`` is a file name at any
depth (``conftest.py``); any other a path from the root; globs match
(``fnmatch``). Beside them, the test sections of ``pyproject.toml``
(``[tool.pytest…]``, ``[tool.coverage…]``) and ``setup.cfg``
(``[tool:pytest]``, ``[coverage:…]``) are protected: a change to such a
file that leaves those sections as the base had them is allowed.

Only the owner unlocks, by an explicit act recorded on the task
(``enact task add --allow-path PATTERN``, ``Task.allow_paths``): the words
of a request or a brief never do.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from enact.frozen_dataclass import dataclass
from enact.tasks.repo_config import RepoConfigError, blob_at

MAX_SECTION_FILE_BYTES = 1024 * 1024


def covers(pattern: str, path: str) -> bool:
    """Whether ``pattern`` (see the module doc) names ``path``; a pattern
    without a trailing ``/`` also names everything under a directory of that name."""
    pattern = pattern.strip().removeprefix("./")
    if not pattern:
        return False
    if pattern.endswith("/"):
        return path.startswith(pattern) or fnmatchcase(path, pattern + "*")
    if "/" not in pattern and fnmatchcase(path.rsplit("/", 1)[-1], pattern):
        return True
    return fnmatchcase(path, pattern) or path.startswith(pattern + "/")


def _toml_sections(text: str) -> Any:
    tool = tomllib.loads(text).get("tool", {})
    return {name: tool.get(name) for name in ("pytest", "coverage")} if isinstance(tool, dict) else tool


def _ini_sections(text: str) -> Any:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read_string(text)
    return {name: dict(parser[name]) for name in parser.sections()
            if name == "tool:pytest" or name.startswith("coverage:")}


_SECTION_FILES = {"pyproject.toml": _toml_sections, "setup.cfg": _ini_sections}
"""Files of which only the sections that configure the test run are protected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectedVerdict:
    blocked: tuple[str, ...] = ()
    """Protected paths the task changed without the owner's leave."""
    unlocked: tuple[str, ...] = ()
    """Protected paths it changed with the owner's leave (shown in its review)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guards:
    repo: Path
    base: str
    patterns: tuple[str, ...]
    """``tasks.protected_paths`` and the repository's own, from the base."""
    allowed: tuple[str, ...] = ()
    """The owner's unlocks for this task."""

    def check(self, root: Path, changed: Sequence[str]) -> ProtectedVerdict:
        """Sort the ``changed`` paths of the checkout at ``root`` (made from
        ``base``) into the protected ones the task may not change and those
        the owner unlocked."""
        return self._sorted(changed, lambda path: _read_bounded(root / path))

    def check_commit(self, head: str, changed: Sequence[str]) -> ProtectedVerdict:
        """As ``check``, for a change the repository holds as the commit
        ``head`` (a remote attempt's, ``enact.tasks.ray_bundles``)."""
        return self._sorted(changed, lambda path: blob_at(self.repo, head, path, limit=MAX_SECTION_FILE_BYTES))

    def _sorted(self, changed: Sequence[str], after: Callable[[str], str | None]) -> ProtectedVerdict:
        blocked: list[str] = []
        unlocked: list[str] = []
        for path in changed:
            if not self._protected(path, after):
                continue
            (unlocked if any(covers(pattern, path) for pattern in self.allowed) else blocked).append(path)
        return ProtectedVerdict(blocked=tuple(blocked), unlocked=tuple(unlocked))

    def _protected(self, path: str, after: Callable[[str], str | None]) -> bool:
        if any(covers(pattern, path) for pattern in self.patterns):
            return True
        sections = _SECTION_FILES.get(path.rsplit("/", 1)[-1])
        return sections is not None and self._sections_changed(path, sections, after)

    def _sections_changed(self, path: str, sections: Any, after: Callable[[str], str | None]) -> bool:
        """Whether the test sections of ``path`` differ from the base's (the
        change's text is ``after(path)``); a file either side that cannot be
        read or parsed counts as changed."""
        try:
            before = blob_at(self.repo, self.base, path, limit=MAX_SECTION_FILE_BYTES)
            return bool(sections(before or "") != sections(after(path) or ""))
        except (RepoConfigError, OSError, UnicodeDecodeError, ValueError, configparser.Error):
            return True


def _read_bounded(file: Path) -> str | None:
    """The text of a regular file the task left, None when it deleted it;
    a symlink or an oversized file raises ValueError (judged changed)."""
    if file.is_symlink():
        raise ValueError(f"{file} is a symlink")
    if not file.exists():
        return None
    if file.stat().st_size > MAX_SECTION_FILE_BYTES:
        raise ValueError(f"{file} is too large")
    return file.read_text(encoding="utf-8")
