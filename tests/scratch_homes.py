"""Homes for the real model CLIs, outside the temporary directory.

They live in the checkout's git-ignored ``.tools/scratch``, or, when the
checkout itself is under /tmp, in ``~/.cache/enact-tests``: Codex refuses to
set up its sandbox helpers in a CODEX_HOME inside the temporary directory,
and a confined task sees a private /tmp, so a home there would not be the
one the test looks at.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _scratch() -> Path:
    in_checkout = Path(__file__).resolve().parent.parent / ".tools" / "scratch"
    temporary = (Path("/tmp"), Path(tempfile.gettempdir()).resolve())
    if any(in_checkout.is_relative_to(directory) for directory in temporary):
        return Path.home() / ".cache" / "enact-tests" / "cli-homes"
    return in_checkout


SCRATCH = _scratch()


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory under SCRATCH for one test, removed afterwards."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=SCRATCH))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def snapshot(directory: Path) -> dict[str, str | bytes]:
    """Every entry under ``directory`` with what it holds (a file's bytes, a
    link's target, ``dir``), to tell that nothing in it changed."""
    entries: dict[str, str | bytes] = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if path.is_symlink():
            entries[name] = f"-> {path.readlink()}"
        elif path.is_dir():
            entries[name] = "dir"
        else:
            entries[name] = path.read_bytes()
    return entries
