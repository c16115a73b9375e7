"""Confinement of a task's runtime and doctor with bubblewrap (``bwrap``).

Inside, the whole filesystem is read-only except the task's worktree, a
private temporary directory (mounted at ``/tmp``) and the task's private
state directories of the runtime (below); ``$ENACT_HOME`` is replaced by an
empty directory, so the control socket, the LMDB environment and the other
tasks' worktrees are not there at all. The network is shared: a runtime talks to its model.

A runtime's state directory (``~/.claude``, ``~/.codex``) is replaced by a
private one of the task's, in which the owner's entries are shown read-only,
but for the runtime's own state (sessions, logs, databases), which is not
there at all: a task can neither change what steers the CLI's later
unconfined calls (its settings, instructions, hooks) nor read or forge
another session's transcript, and what the CLI writes lands in the private
directory (see ``private_state_binds``).

Confinement is an argv prefix: whoever starts the subprocess puts it before
the command (the doctor, the scripted runtime's ``run`` rules, a CLI adapter).
Without ``bwrap`` a task runs unconfined and its record says so.
"""

from __future__ import annotations

import contextlib
import fnmatch
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
    private_state: tuple[tuple[Path, Path], ...] = ()
    """(owner's state directory, the task's private one in its place): where
    what a confined call writes there really is."""

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
class StateDir:
    """A runtime's state directory (``path``, the owner's) and the glob
    patterns of the entries in it that are the runtime's own state: its
    sessions, logs, databases, caches."""

    path: Path
    own_state: tuple[str, ...] = ()


def private_state_binds(state: StateDir, private: Path) -> list[str]:
    """The bwrap arguments that put ``private`` (this task's, empty or left
    by its earlier calls) in place of the owner's state directory and show
    in it, read-only, each of the owner's entries but the runtime's own
    state. A bind's source is found in the host's filesystem, so
    ``state.path / name`` as a source is the owner's entry even though
    ``state.path`` inside is ``private``; the mount points bwrap makes for
    them are in ``private`` too, never in the owner's directory. A symlinked
    entry is bound from its target (a dangling one is left out, and so is
    one pointing into the runtime's own state); one gone by the time bwrap
    starts is skipped (``--ro-bind-try``)."""
    argv = ["--bind", str(private), str(state.path)]
    try:
        names = sorted(os.listdir(state.path))
    except OSError:
        return argv  # unreadable: the task sees none of it
    real_dir = state.path.resolve()
    for name in names:
        entry = state.path / name
        source = entry.resolve() if entry.is_symlink() else entry
        inside = source.relative_to(real_dir).parts[:1] if source.is_relative_to(real_dir) else ()
        if _own_state(state, name) or any(_own_state(state, part) for part in inside):
            continue
        if source.is_file() or source.is_dir():
            argv += ["--ro-bind-try", str(source), str(entry)]
    return argv


def _own_state(state: StateDir, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in state.own_state)


def bwrap_prefix(
    bwrap: str, *, worktree: Path, private_tmp: Path, hidden: Sequence[Path],
    private_state: Sequence[tuple[StateDir, Path]] = (), tools: Sequence[Path] = (),
) -> tuple[str, ...]:
    """The bwrap argv up to ``--``. Mount order matters: the private /tmp
    first, the ``tools`` that lived under the real /tmp bound back read-only,
    then the hidden directories as empty tmpfs (which may lie under /tmp),
    then the worktree and each runtime state directory's private
    replacement bound into place (inside a hidden directory, if that is
    where they live) with the owner's entries over it; last, each hidden
    tmpfs is made read-only, so nothing can be left there either."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(private_tmp), "/tmp"]
    for path in tools:
        argv += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    argv += ["--bind", str(worktree), str(worktree)]
    for state, private in private_state:
        argv += private_state_binds(state, private)
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
    mode: str, *, home: Path, worktree: Path, programs: Sequence[Path] = (), state: Sequence[StateDir] = (),
    readable: Sequence[Path] = (),
) -> Iterator[Confinement]:
    """The task's confinement for as long as the task runs (all its calls
    and repairs: a session the runtime wrote in its private state stays
    there until the end); its private directories are removed afterwards.
    ``programs``: where the runtime runs from, kept visible (read-only);
    ``state``: the runtime's state directories, each replaced by a private
    one (see ``private_state_binds``); ``readable``: what the task's
    commands read besides (the owner's git objects, which the task's own git
    uses), kept visible (read-only) like ``programs``."""
    root = Path(tempfile.mkdtemp(prefix=f"enact-{worktree.name}-"))
    tmp = root / "tmp"
    tmp.mkdir()
    try:
        bwrap = find_bwrap() if mode == "auto" else None
        if bwrap is None:
            yield Confinement(tmp=tmp, env=task_environment(tmp))
        else:
            private_state = []
            for index, state_dir in enumerate(_existing(state)):
                private = root / f"state-{index}"
                private.mkdir()
                private_state.append((state_dir, private))
            prefix = bwrap_prefix(bwrap, worktree=worktree, private_tmp=tmp, hidden=(home.resolve(),),
                                  private_state=private_state, tools=tools_under_tmp(programs=(*programs, *readable)))
            yield Confinement(prefix=prefix, tmp=tmp, env=task_environment(Path("/tmp")),
                              private_state=tuple((state_dir.path, private) for state_dir, private in private_state))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _existing(state: Sequence[StateDir]) -> list[StateDir]:
    """The state directories, each made if missing (an empty one, as the
    runtime's first call would make it): bwrap mounts only on a directory
    that exists. One that cannot be made is left out, and the runtime's
    call then says what it could not write."""
    made = []
    for state_dir in state:
        with contextlib.suppress(OSError):
            state_dir.path.mkdir(parents=True, exist_ok=True)
            made.append(state_dir)
    return made
