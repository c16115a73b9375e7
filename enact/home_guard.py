"""Who may have written a home's files, and who may read them.

A home's ``config.toml`` names commands the daemon runs (a
``local_deliver_command`` planted there by another user once ran as root on
the first reply), so what the daemon reads from its home must be the
owner's own. The rule, the same for the home directory and for each file
the daemon takes instructions from (``config.toml``, ``commands.toml``,
``scripted.toml``, an identity file): it is owned by the uid the daemon runs
as, and neither group nor others may write it. Anything else is refused in
one line naming the path. A file owned by root in a non-root user's home
is refused too: it is not the owner's, and ``chown`` is the owner's one-line
fix; an exception would be one more rule to get wrong.

What the daemon writes is private: it runs with umask 077, so every file and
directory it (or LMDB, tantivy, git in a worktree) creates in the home is
0600 / 0700. A home from before, with files group or others may read, is
tightened at start and the log names how many; refusing would not un-read
them and would only leave the owner to type the same ``chmod``. Only a
writable home or instruction file is refused: its content may not be the
owner's. Git run in the owner's repositories gets the owner's own umask
back (``owner_umask``), so a change landed there is not 0600 in their checkout.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from enact.errors import EnactError
from enact.home import WORKTREES_DIR

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077
_NOT_WALKED = frozenset({WORKTREES_DIR})
"""Repository checkouts: many files, none of them the home's own; the
directory itself is tightened, which closes them to others."""

_owner_umask: int | None = None


class HomeRefused(EnactError):
    """The home or one of its files is not used; one line naming the path."""


def check_home(root: Path) -> None:
    """Refuse a home that is not a directory, not this user's, or writable
    by group or others; create a missing one (0700)."""
    if os.path.islink(root) and not os.path.exists(root):
        raise HomeRefused(f"the home {root} is a symbolic link to {os.readlink(root)}, which does not exist")
    if os.path.exists(root) and not os.path.isdir(root):
        raise HomeRefused(f"the home {root} is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as error:
        raise HomeRefused(f"the home {root} cannot be created: {error.strerror or error}") from None
    _check_owned(root, "the home")


def check_owned_file(path: Path) -> None:
    """Refuse ``path`` if it exists but is not a regular file of this user's
    that group and others cannot write; a missing one is fine."""
    if not os.path.lexists(path):
        return
    if not os.path.isfile(path):
        raise HomeRefused(f"{path} is not a regular file")
    _check_owned(path, "")


def _check_owned(path: Path, what: str) -> None:
    status = os.stat(path)
    named = f"{what} {path}" if what else str(path)
    uid = os.geteuid()
    if status.st_uid != uid:
        raise HomeRefused(f"{named} is owned by uid {status.st_uid}, not by uid {uid} that runs enact: "
                          "refusing it (chown it if it is yours)")
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise HomeRefused(f"{named} is writable by group or others (mode {stat.S_IMODE(status.st_mode):04o}): "
                          f"refusing it (chmod go-w {path} if its content is yours)")


def make_private(root: Path) -> int:
    """From now on this process creates private files; take group and
    others' access away from what is already in the home. How many entries
    were tightened."""
    global _owner_umask
    previous = os.umask(PRIVATE_UMASK)
    if _owner_umask is None:
        _owner_umask = previous
    tightened = _tighten(str(root))
    for directory, names, files in os.walk(root):
        names[:] = [name for name in names if not (directory == str(root) and name in _NOT_WALKED)]
        for name in (*names, *files):
            tightened += _tighten(os.path.join(directory, name))
    if tightened:
        log.warning("tightened %d entries in %s that group or others could read (now 0600 / 0700)",
                    tightened, root)
    return tightened


def _tighten(path: str) -> int:
    try:
        status = os.lstat(path)
        if stat.S_ISLNK(status.st_mode) or not status.st_mode & 0o077:
            return 0
        os.chmod(path, stat.S_IMODE(status.st_mode) & ~0o077)
    except OSError as error:  # gone meanwhile, or not ours to change
        log.warning("cannot make %s private: %s", path, error.strerror or error)
        return 0
    return 1


def owner_umask() -> int:
    """For a child about to run in the owner's repository (``subprocess``'s
    ``umask``): the umask the owner started the daemon with, or -1 (keep
    this process's) when it was not recorded."""
    return _owner_umask if _owner_umask is not None else -1
