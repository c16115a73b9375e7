"""Confinement of a task's runtime and doctor with bubblewrap (``bwrap``).

Inside, the whole filesystem is read-only except the task's worktree, a
private temporary directory (mounted at ``/tmp``) and what the runtime names
for its own state; ``$ENACT_HOME`` is replaced by an empty directory, so the
control socket, the LMDB environment and the other tasks' worktrees are not
there at all. The network is shared: a runtime talks to its model.

What in the runtime's state steers it (its settings, instructions, hooks,
commands) is read-only even there: written by a task, it would steer every
later unconfined call of the CLI. A path of those that does not exist yet is
covered by an empty read-only placeholder (see ``Placeholders``).

Confinement is an argv prefix: whoever starts the subprocess puts it before
the command (the doctor, the scripted runtime's ``run`` rules, a CLI adapter).
Without ``bwrap`` a task runs unconfined and its record says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

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


@dataclass(frozen=True, slots=True)
class SteeringPath:
    """A file or directory in a runtime's state that steers the CLI; it may
    not exist yet."""

    path: Path
    directory: bool = False


class Placeholders:
    """The mount points made for steering paths that did not exist.

    bwrap can bind only over a path that exists and makes a missing
    destination itself, in the real directory beneath (the state directory
    is a bind of the owner's): an empty file or directory appears in the
    owner's config. Empty, both CLIs read it as nothing (measured: claude
    2.1.328 says an empty ``.claude.json`` starts it with defaults, which a
    missing one does too; codex 0.169 says nothing). It is removed when
    the last confinement covering it ends, and only if still empty (the
    owner's CLI may have written it meanwhile); counted per path because
    removing it while another task's sandbox is mounted on it would lift
    that sandbox's cover. The paths in use are kept in a ledger in enact's
    home, written before bwrap can make them, so that the next daemon
    removes what a killed one left (still only if empty)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_use: Counter[Path] = Counter()
        self._directories: dict[Path, bool] = {}
        self._ledger: Path | None = None

    def take(self, paths: Sequence[SteeringPath], ledger: Path) -> tuple[SteeringPath, ...]:
        """Of ``paths``, those that need a placeholder (missing, or one
        already), now counted as in use until ``release``."""
        with self._lock:
            if self._ledger != ledger:  # the first confinement of this process in this home
                self._ledger = ledger
                _sweep(ledger)
            missing = tuple(p for p in paths if p.path in self._in_use or not os.path.lexists(p.path))
            self._in_use.update(p.path for p in missing)
            self._directories.update((p.path, p.directory) for p in missing)
            self._write_ledger()
        return missing

    def release(self, paths: Sequence[SteeringPath]) -> None:
        with self._lock:
            self._in_use.subtract(p.path for p in paths)
            for steering in paths:
                if self._in_use[steering.path] <= 0:
                    del self._in_use[steering.path]
                    del self._directories[steering.path]
                    _remove_if_empty(steering)
            self._write_ledger()

    def _write_ledger(self) -> None:
        if self._ledger is None:
            return
        entries = [{"path": str(path), "directory": self._directories[path]} for path in sorted(self._in_use)]
        scratch = self._ledger.with_suffix(".tmp")
        scratch.write_bytes(orjson.dumps(entries))
        os.replace(scratch, self._ledger)


def _sweep(ledger: Path) -> None:
    """Remove the placeholders a process that ended without releasing them
    left behind, as named by its ledger."""
    try:
        entries = orjson.loads(ledger.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return  # none, or unreadable: nothing is removed on a guess
    if not isinstance(entries, list):
        return
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            _remove_if_empty(SteeringPath(Path(entry["path"]), directory=bool(entry.get("directory"))))
    ledger.unlink(missing_ok=True)


def _remove_if_empty(steering: SteeringPath) -> None:
    with contextlib.suppress(OSError):  # not there, or written since: left as it is
        if steering.directory:
            steering.path.rmdir()
        elif not steering.path.is_symlink() and steering.path.is_file() and steering.path.stat().st_size == 0:
            steering.path.unlink()


PLACEHOLDERS = Placeholders()
"""One per process: the daemon's concurrent tasks share the owner's config."""


def read_only_binds(steering: Sequence[SteeringPath], placeholders: Sequence[SteeringPath], *,
                    empty_file: Path, empty_dir: Path) -> tuple[tuple[Path, Path], ...]:
    """(source, destination) of each steering path: itself, or for one that
    needs a placeholder the empty file or directory from enact's home."""
    binds = []
    for path in steering:
        source = (empty_dir if path.directory else empty_file) if path in placeholders else path.path
        binds.append((source, path.path))
    return tuple(binds)


def bwrap_prefix(
    bwrap: str, *, worktree: Path, private_tmp: Path, hidden: Sequence[Path], writable: Sequence[Path] = (),
    read_only: Sequence[tuple[Path, Path]] = (), tools: Sequence[Path] = (),
) -> tuple[str, ...]:
    """The bwrap argv up to ``--``. Mount order matters: the private /tmp
    first, the ``tools`` that lived under the real /tmp bound back read-only,
    then the hidden directories as empty tmpfs (which may lie under /tmp),
    then the worktree and the writable paths bound into place (inside a
    hidden directory, if that is where they live), then the ``read_only``
    (source, destination) binds over them; last, each hidden tmpfs is made
    read-only, so nothing can be left there either."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(private_tmp), "/tmp"]
    for path in tools:
        argv += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    for path in (worktree, *writable):
        argv += ["--bind", str(path), str(path)]
    for source, destination in read_only:
        argv += ["--ro-bind", str(source), str(destination)]
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
    mode: str, *, home: Path, worktree: Path, writable: Sequence[Path] = (), programs: Sequence[Path] = (),
    steering: Sequence[SteeringPath] = (),
) -> Iterator[Confinement]:
    """The task's confinement for as long as the task runs; its private
    temporary directory is removed afterwards. ``programs``: where the
    runtime runs from, kept visible (read-only); ``steering``: paths in the
    ``writable`` ones made read-only again."""
    tmp = Path(tempfile.mkdtemp(prefix=f"enact-{worktree.name}-"))
    placeholders: tuple[SteeringPath, ...] = ()
    try:
        bwrap = find_bwrap() if mode == "auto" else None
        if bwrap is None:
            yield Confinement(tmp=tmp, env=task_environment(tmp))
        else:
            covered = [path for path in steering if any(path.path.is_relative_to(w) for w in writable)]
            empty_file, empty_dir = _empty_sources(home)
            placeholders = PLACEHOLDERS.take(covered, ledger=empty_file.parent / "placeholders.json")
            read_only = read_only_binds(covered, placeholders, empty_file=empty_file, empty_dir=empty_dir)
            prefix = bwrap_prefix(bwrap, worktree=worktree, private_tmp=tmp, hidden=(home.resolve(),),
                                  writable=writable, read_only=read_only, tools=tools_under_tmp(programs=programs))
            yield Confinement(prefix=prefix, tmp=tmp, env=task_environment(Path("/tmp")))
    finally:
        PLACEHOLDERS.release(placeholders)
        shutil.rmtree(tmp, ignore_errors=True)


def _empty_sources(home: Path) -> tuple[Path, Path]:
    """An empty read-only file and directory in enact's home, bound over the
    steering paths that do not exist."""
    directory = home / "confine"
    empty_file, empty_dir = directory / "empty-file", directory / "empty-dir"
    empty_dir.mkdir(parents=True, exist_ok=True)
    if not empty_file.exists():
        empty_file.touch(mode=0o444)
    return empty_file, empty_dir
