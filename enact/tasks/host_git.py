"""git as the host runs it, in an environment and with options that keep it
from running anything a task could have written.

Through ``subprocess.run``, not ``sh``: a host git call is short, streams
nothing and is waited for at once, and ``sh``'s threads, polling and Python
fork cost several times what git itself takes (a task runs dozens).
``subprocess`` starts it with vfork, the owner's umask set in the child.

A task's worktree is the task's to write, all of it: its ``.git`` entry,
``.gitattributes``, nested repositories. The host therefore addresses a
worktree only with the git directory it recorded when it made it (the owner
repository's own ``worktrees/<name>``) and an explicit work tree
(``Worktree.git``), and runs git with ``HOST_OPTIONS``: no hook, no
fsmonitor, no submodule (a nested ``.git`` is the task's), no system config.
In-tree ``.gitattributes`` still apply (git 2.39 cannot read them from a
commit instead), but an attribute only names a filter or diff driver: its
command comes from configuration, which the task cannot write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator

from enact.errors import EnactError
from enact.home_guard import owner_umask
from enact.one_cpu import unpinned
from enact.process import program_ended, program_started

AUTHOR = ("enact", "enact@localhost")
"""Who the host's commits are by, unless a call names someone (``git(identity=...)``)."""

HOST_OPTIONS = (
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "diff.ignoreSubmodules=all", "-c", "submodule.recurse=false", "-c", "status.submoduleSummary=false",
)
"""For every git the host runs where a task's files are: no hook, fsmonitor
command or nested repository of the task's is run or looked into."""


class WorktreeError(EnactError):
    """A git operation on a task's worktree failed; the message is one line."""


def git_env(identity: tuple[str, str] = AUTHOR) -> dict[str, str]:
    # The daemon's own environment must not point git elsewhere (a GIT_DIR
    # inherited from a hook, say), and commits need an identity even where
    # the owner configured none. The system configuration is left out: what
    # the host's git runs must come from the owner's own files.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    name, email = identity
    # GIT_OPTIONAL_LOCKS=0: a look (``git status`` on a worktree, the
    # owner's checkout) writes no refreshed index, so it never holds the
    # index lock while a task's capture, or the owner's own git, commits.
    env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name,
               GIT_COMMITTER_EMAIL=email, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1",
               GIT_OPTIONAL_LOCKS="0")
    return env


def git(cwd: os.PathLike[str] | str, *args: str, options: tuple[str, ...] = (),
        identity: tuple[str, str] = AUTHOR) -> str:
    """Run ``git [OPTIONS] ARGS`` in ``cwd``, committing as ``identity``
    (name, email); its standard output, or WorktreeError."""
    shown = ("git", *args)  # the options are the same on every call: the log leaves them out
    started = program_started(shown)
    try:
        with _one_worktree_change_at_a_time(cwd, args), unpinned():
            done = subprocess.run(["git", *HOST_OPTIONS, *options, *args], cwd=cwd, env=git_env(identity),
                                  stdin=subprocess.DEVNULL, capture_output=True, umask=owner_umask())
    except OSError as error:
        program_ended(shown, started, "could not start")
        if shutil.which("git") is None:
            raise WorktreeError("git is not installed") from None
        raise WorktreeError(f"git {args[0]} cannot start in {cwd}: {error.strerror or error}") from None
    program_ended(shown, started, done.returncode)
    if done.returncode != 0:
        raise WorktreeError(f"git {args[0]} failed in {cwd}: {_why(done.stderr, done.returncode)}")
    return done.stdout.decode(errors="replace")


def _why(stderr: bytes, returncode: int) -> str:
    """The line of git's error output that says what failed: its first
    ``fatal:`` or ``error:`` line (after it git may add advice, such as the
    last line of a lock it found, "remove the file manually to continue",
    which names no file), else its last line, else the exit status."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    said = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1] if lines else "")
    return said or f"exit status {returncode}"


_worktree_locks: dict[str, threading.Lock] = {}
_worktree_locks_guard = threading.Lock()


@contextlib.contextmanager
def _one_worktree_change_at_a_time(repo: os.PathLike[str] | str, args: tuple[str, ...]) -> Iterator[None]:
    """``git worktree add`` and ``prune`` of one repository, one at a time:
    git writes a new worktree's directory under ``.git/worktrees`` in steps,
    and another worker's add or prune reading it in between fails ("failed to
    read .../commondir"), seen with 4 workers once programs started fast."""
    if args[:1] != ("worktree",) or args[1:2] not in (("add",), ("prune",)):
        yield
        return
    key = os.path.realpath(repo)
    with _worktree_locks_guard:
        lock = _worktree_locks.setdefault(key, threading.Lock())
    with lock:
        yield


def configured_identity(repo: os.PathLike[str] | str) -> tuple[str, str] | None:
    """The ``user.name`` and ``user.email`` the repository is configured
    with (its own configuration, then the owner's global one; never the
    system's, as for every git the host runs); None when either is unset."""
    found: list[str] = []
    for key in ("user.name", "user.email"):
        try:
            value = git(repo, "config", "--get", key).strip()
        except WorktreeError:  # exit 1: unset
            return None
        if not value:
            return None
        found.append(value)
    return found[0], found[1]
