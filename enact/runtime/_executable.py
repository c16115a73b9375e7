"""Where a model CLI is: the one lookup the CLI adapters (codex, claude) share,
and the directory it runs from.

An executable named in the settings (or their environment variable) must be
there: a typo is an error, never a silent fallback to another ``codex`` or
``claude`` on PATH. Unnamed, the program is looked up on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from enact.config import Config
from enact.runtime import RuntimeUnavailable


def find_executable(named: str, *, program: str, where: str, not_on_path: str) -> str:
    """``named`` if set (``where`` says who set it), else ``program`` on PATH.
    Raises RuntimeUnavailable saying what to do; ``not_on_path`` is what it
    says when PATH has no ``program``."""
    if named:
        path = Path(named).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RuntimeUnavailable(f"{where}: {named} is not an executable file; fix it or unset it")
        return str(path)
    found = shutil.which(program)
    if found is None:
        raise RuntimeUnavailable(not_on_path)
    return found


def named_where(settings: Config, key: str, variable: str) -> str:
    """Who named the executable setting ``key``, in the words an error shows:
    its environment variable, else the key and where it was read."""
    source = settings.sources[key]
    return variable if source == "environment" else f"{key} ({source})"


def install_root(executable: Path) -> Path:
    """The directory a program runs from: for an npm-installed CLI, the
    prefix holding its ``node_modules`` (its native parts live in sibling
    packages), else the directory of the resolved executable."""
    resolved = executable.resolve()
    parts = resolved.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules")])
    return resolved.parent
