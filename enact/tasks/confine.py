"""Confinement of a task's runtime and doctor with bubblewrap (``bwrap``).

Inside, the whole filesystem is read-only except the task's worktree, a
private temporary directory (mounted at ``/tmp``) and the task's private
state directories of the runtime (below); ``$ENACT_HOME`` is replaced by an
empty directory, so the control socket, the LMDB environment and the other
tasks' worktrees are not there at all, and so are the owner's credentials a
task never needs (``HIDDEN_CREDENTIALS``). The network is shared: a runtime
talks to its model.

Whatever uid the daemon has, a task has no capabilities (``--cap-drop
ALL``) in namespaces of its own (user, pid, ipc, uts, mount, cgroup): as
root it cannot unmount the mask over the home nor remount ``/`` read-write,
and it sees no process of the host. Outside its user namespace it keeps
the daemon's uid, so a root daemon's task still reads what root may read by
a file's owner bits (``HIDDEN_SYSTEM`` is masked for that reason); it writes
nothing outside its writable places.

A runtime's state directory (``~/.claude``, ``~/.codex``) is replaced by a
private one of the task's, in which the owner's entries are shown read-only,
but for the runtime's own state (sessions, logs, databases), which is not
there at all: a task can neither change what steers the CLI's later
unconfined calls (its settings, instructions, hooks) nor read or forge
another session's transcript, and what the CLI writes lands in the private
directory (see ``private_state_binds``).

Confinement is an argv prefix: whoever starts the subprocess puts it before
the command (the doctor, the scripted runtime's ``run`` rules, a CLI adapter).
The prefix is tried (``true`` under it) before a task uses it: without
``bwrap``, or with one that cannot confine here (user namespaces disabled),
a task runs unconfined and its record says why, unless ``tasks.confinement``
is ``required``, which refuses to run it (``ConfinementUnavailable``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path

from enact.environment import task_environment
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.one_cpu import unpinned

CONFINEMENT_MODES = ("auto", "required", "off")
"""``tasks.confinement``: ``auto`` confines when bwrap can, else runs the task
unconfined saying so; ``required`` refuses to run a task it cannot confine;
``off`` never confines."""

HIDDEN_CREDENTIALS = (".ssh", ".gnupg", ".aws", ".config/gh", ".docker", ".kube", ".netrc", ".git-credentials")
"""Below the owner's HOME: credentials no task needs, replaced by empty ones."""

HIDDEN_SYSTEM = ("/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_*_key")
"""Root's own secrets (globs): a task of a daemon run as root is still root
outside its user namespace, and reads what root owns."""

NAMESPACES = ("--unshare-all", "--share-net", "--unshare-user", "--cap-drop", "ALL", "--new-session",
              "--die-with-parent")
"""Namespaces of its own but the network's (its runtime talks to its model),
a user namespace always (not only where bwrap can), no capabilities even as
root, no terminal to push input into (a new session), and gone with bwrap."""

ROOT_INSIDE_AS = ("--uid", "65534", "--gid", "65534")
"""A daemon run as root gives its task another uid inside (still root's
outside, so it writes its worktree): uid 0 without capabilities makes a
bwrap inside (Codex's own sandbox of its commands) take itself for
privileged and fail ("setting up uid map: Operation not permitted")."""


class ConfinementUnavailable(EnactError):
    """``tasks.confinement = "required"`` and the task cannot be confined;
    the message is the reason, one line."""


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
    unconfined: str = ""
    """Why the task is not confined ("" when it is), one line."""

    @property
    def confined(self) -> bool:
        return bool(self.prefix)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]


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
    # Mounted where it really is: bwrap cannot make a mount point through
    # a symlinked parent, and the path through the link leads there too.
    real_dir = state.path.resolve()
    argv = ["--bind", str(private), str(real_dir)]
    try:
        names = sorted(os.listdir(state.path))
    except OSError:
        return argv  # unreadable: the task sees none of it
    for name in names:
        entry = state.path / name
        source = entry.resolve() if entry.is_symlink() else entry
        inside = source.relative_to(real_dir).parts[:1] if source.is_relative_to(real_dir) else ()
        if _own_state(state, name) or any(_own_state(state, part) for part in inside):
            continue
        if source.is_file() or source.is_dir():
            argv += ["--ro-bind-try", str(source), str(real_dir / name)]
    return argv


def _own_state(state: StateDir, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in state.own_state)


def bwrap_prefix(
    bwrap: str, *, worktree: Path, private_tmp: Path, hidden: Sequence[Path],
    private_state: Sequence[tuple[StateDir, Path]] = (), tools: Sequence[Path] = (),
    credentials: Sequence[Path] = (), read_only_worktree: bool = False, shared: Sequence[Path] = (),
    readable: Sequence[Path] = (),
) -> tuple[str, ...]:
    """The bwrap argv up to ``--``. Mount order matters: the private /tmp
    first, the ``tools`` that lived under the real /tmp bound back read-only,
    then the hidden directories as empty tmpfs (which may lie under /tmp)
    and the hidden ``credentials`` (a directory as an empty tmpfs, a file as
    an empty one), then the worktree and each runtime state directory's
    private replacement bound into place (inside a hidden directory, if that
    is where they live) with the owner's entries over it; last, each hidden
    tmpfs is made read-only, so nothing can be left there either.

    A conversation's call (``enact.tasks.confined_calls``) has a
    ``read_only_worktree``, the runtime's state directories ``shared``
    (bound writable as they are: its sessions live on from call to call)
    and ``readable`` files it is given (an image), bound read-only."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(private_tmp), "/tmp"]
    for path in tools:
        argv += ["--ro-bind", str(path), str(path)]
    masked = list(hidden)
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    for path in credentials:
        if path.is_dir() and not path.is_symlink():
            argv += ["--tmpfs", str(path)]
            masked.append(path)
        elif path.exists():
            argv += ["--ro-bind-try", "/dev/null", str(path.resolve())]
    argv += ["--ro-bind" if read_only_worktree else "--bind", str(worktree.resolve()), str(worktree.resolve())]
    for state, private in private_state:
        argv += private_state_binds(state, private)
    for path in shared:
        argv += ["--bind", str(path.resolve()), str(path.resolve())]
    for path in readable:
        argv += ["--ro-bind-try", str(path.resolve()), str(path.resolve())]
    for path in masked:
        argv += ["--remount-ro", str(path)]
    # A new pid namespace whose init dies with bwrap: killing bwrap's
    # process group ends everything inside, however deep.
    inside_as = ROOT_INSIDE_AS if os.geteuid() == 0 else ()
    argv += [*NAMESPACES, *inside_as, "--chdir", str(worktree.resolve()), "--"]
    return tuple(argv)


def hidden_credentials(environ: Mapping[str, str] = os.environ) -> tuple[Path, ...]:
    home = Path(environ.get("HOME") or Path.home())
    system = [Path(found) for pattern in HIDDEN_SYSTEM for found in sorted(glob.glob(pattern))]
    return (*(home / name for name in HIDDEN_CREDENTIALS), *system)


def tried(prefix: Sequence[str], cwd: Path) -> str:
    """Why ``prefix`` cannot confine (its first line of complaint), or "" when
    ``true`` runs under it: bwrap fails at start where the kernel refuses it
    namespaces, and a task must not believe itself confined then."""
    try:
        with unpinned():
            done = subprocess.run([*prefix, "true"], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap cannot start: {error}"
    if done.returncode == 0:
        return ""
    said = next((line for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
    return f"bwrap cannot confine here: {said.strip()}"


def state_of(mode: str) -> str:
    """What ``enact status`` says of confinement: tried on an empty worktree."""
    if mode == "off":
        return "off (tasks.confinement = off): tasks run unconfined"
    with tempfile.TemporaryDirectory(prefix="enact-probe-") as scratch:
        worktree = Path(scratch) / "w"
        worktree.mkdir()
        reason = _unconfinable(mode, home=worktree, worktree=worktree, tmp=worktree)
    if not reason:
        return f"{mode}: tasks run confined (bwrap, no capabilities, own namespaces, network shared)"
    refusal = "tasks do not run" if mode == "required" else "tasks run UNCONFINED"
    return f"{mode}: {refusal}: {reason}"


def _unconfinable(mode: str, *, home: Path, worktree: Path, tmp: Path) -> str:
    bwrap = find_bwrap()
    if bwrap is None:
        return "bwrap is not installed"
    return tried(bwrap_prefix(bwrap, worktree=worktree, private_tmp=tmp, hidden=(home,)), worktree)


def settled(mode: str, prefix: tuple[str, ...], reason: str, *, tmp: Path, passthrough: Sequence[str],
            private_state: tuple[tuple[Path, Path], ...] = ()) -> Confinement:
    """What a call runs under once bwrap was tried (``reason`` empty: it
    confines): the confined prefix with the environment as seen inside, or,
    where it cannot confine, nothing but the private directories, saying
    why. Raises ConfinementUnavailable when ``mode`` is ``required`` and it
    cannot confine."""
    if reason and mode == "required":
        raise ConfinementUnavailable(f"not run: tasks.confinement is required and {reason}")
    if reason:
        return Confinement(tmp=tmp, env=task_environment(tmp=tmp, home=tmp / "home", passthrough=passthrough),
                           unconfined=reason)
    return Confinement(prefix=prefix, tmp=tmp, private_state=private_state,
                       env=task_environment(tmp=Path("/tmp"), home=Path("/tmp/home"), passthrough=passthrough))


@contextmanager
def confinement(
    mode: str, *, home: Path, worktree: Path, programs: Sequence[Path] = (), state: Sequence[StateDir] = (),
    passthrough: Sequence[str] = (), readable: Sequence[Path] = (),
) -> Iterator[Confinement]:
    """The task's confinement for as long as the task runs (all its calls
    and repairs: a session the runtime wrote in its private state stays
    there until the end); its private directories are removed afterwards.
    ``programs``: where the runtime runs from, kept visible (read-only);
    ``state``: the runtime's state directories, each replaced by a private
    one (see ``private_state_binds``); ``readable``: what the task's
    commands read besides (the owner's git objects, which the task's own git
    uses), kept visible (read-only) like ``programs``; ``passthrough``: the
    owner's ``tasks.env_passthrough``. Raises ConfinementUnavailable when
    ``mode`` is ``required`` and bwrap cannot confine."""
    root = Path(tempfile.mkdtemp(prefix=f"enact-{worktree.name}-"))
    tmp = root / "tmp"
    (tmp / "home").mkdir(parents=True)
    try:
        bwrap = find_bwrap() if mode != "off" else None
        reason = "tasks.confinement is off" if mode == "off" else "bwrap is not installed"
        prefix: tuple[str, ...] = ()
        private_state = []
        if bwrap is not None:
            for index, state_dir in enumerate(_existing(state)):
                private = root / f"state-{index}"
                private.mkdir()
                private_state.append((state_dir, private))
            prefix = bwrap_prefix(bwrap, worktree=worktree, private_tmp=tmp, hidden=(home.resolve(),),
                                  private_state=private_state, tools=tools_under_tmp(programs=(*programs, *readable)),
                                  credentials=hidden_credentials())
            reason = tried(prefix, worktree)
        yield settled(mode, prefix, reason, tmp=tmp, passthrough=passthrough,
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
