"""Confinement of a task's runtime and doctor with bubblewrap (``bwrap``).

Inside, the whole filesystem is read-only except the task's worktree, a
private temporary directory (mounted at ``/tmp``) and what the runtime names
for its own state; ``$ENACT_HOME`` is replaced by an empty directory, so the
control socket, the LMDB environment and the other tasks' worktrees are not
there at all. The network is shared: a runtime talks to its model.

Confinement is an argv prefix: whoever starts the subprocess puts it before
the command (the doctor, the scripted runtime's ``run`` rules, a CLI adapter).
Without ``bwrap`` a task runs unconfined and its record says so.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CONFINEMENT_MODES = ("auto", "off")
"""``tasks.confinement``: ``auto`` confines when bwrap is installed; ``off`` never."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


@dataclass(frozen=True, slots=True, kw_only=True)
class Confinement:
    """How one task's subprocesses run: ``prefix`` is empty when unconfined."""

    prefix: tuple[str, ...] = ()
    tmp: Path | None = None
    """The private temporary directory (TMPDIR for the task's commands)."""
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def confined(self) -> bool:
        return bool(self.prefix)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]


def install_root(executable: Path) -> Path:
    """The directory a program runs from: for an npm-installed CLI, the
    prefix holding its ``node_modules`` (its native parts live in sibling
    packages), else the directory of the resolved executable."""
    resolved = executable.resolve()
    parts = resolved.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules")])
    return resolved.parent


def tools_under_tmp(environ: Mapping[str, str] = os.environ, programs: Sequence[Path] = ()) -> tuple[Path, ...]:
    """What a task's commands run that lives under the real /tmp, which the
    private /tmp would hide: this interpreter's installation (a checkout or
    virtualenv there), the directories on PATH, and ``programs`` (where the
    runtime runs from)."""
    candidates = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent, *programs]
    candidates += [Path(entry) for entry in environ.get("PATH", "").split(os.pathsep) if entry]
    found: list[Path] = []
    for candidate in candidates:
        path = candidate.resolve()
        if path.is_relative_to("/tmp") and path != Path("/tmp") and path.is_dir() and path not in found:
            found.append(path)
    return tuple(found)


def bwrap_prefix(
    bwrap: str, *, worktree: Path, private_tmp: Path, hidden: Sequence[Path], writable: Sequence[Path] = (),
    tools: Sequence[Path] = (),
) -> tuple[str, ...]:
    """The bwrap argv up to ``--``. Mount order matters: the private /tmp
    first, the ``tools`` that lived under the real /tmp bound back read-only,
    then the hidden directories as empty tmpfs (which may lie under /tmp),
    then the worktree and the writable paths bound into place (inside a
    hidden directory, if that is where they live); last, each hidden tmpfs
    is made read-only, so nothing can be left there either."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(private_tmp), "/tmp"]
    for path in tools:
        argv += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    for path in (worktree, *writable):
        argv += ["--bind", str(path), str(path)]
    for path in hidden:
        argv += ["--remount-ro", str(path)]
    # A new pid namespace whose init dies with bwrap: killing bwrap's
    # process group ends everything inside, however deep.
    argv += ["--unshare-pid", "--die-with-parent", "--chdir", str(worktree), "--"]
    return tuple(argv)


def task_environment(tmp: Path | None) -> dict[str, str]:
    """The environment of a task's commands: the daemon's, without its own
    ``ENACT_*`` settings (a repository's tests must not find the daemon's
    home), with TMPDIR pointing at the private temporary directory."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ENACT_")}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return env


@contextmanager
def confinement(
    mode: str, *, home: Path, worktree: Path, writable: Sequence[Path] = (), programs: Sequence[Path] = ()
) -> Iterator[Confinement]:
    """The task's confinement for as long as the task runs; its private
    temporary directory is removed afterwards. ``programs``: where the
    runtime runs from, kept visible (read-only)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"enact-{worktree.name}-"))
    try:
        bwrap = find_bwrap() if mode == "auto" else None
        if bwrap is None:
            yield Confinement(tmp=tmp, env=task_environment(tmp))
        else:
            prefix = bwrap_prefix(bwrap, worktree=worktree, private_tmp=tmp, hidden=(home.resolve(),),
                                  writable=writable, tools=tools_under_tmp(programs=programs))
            yield Confinement(prefix=prefix, tmp=tmp, env=task_environment(Path("/tmp")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
