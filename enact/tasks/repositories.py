"""The repository a task works on, checked one way wherever work enters.

Every entry point ends in the daemon's actors (``task add``, a chat
``/task.add``, a model's action, ``backlog add`` and ``promote``, ``cron
add`` and each due time it fires, ``evolve approve``), and each checks the
repository with ``usable`` before anything is stored or queued (naming
none, with no ``tasks.default_repo``, is the queue's ``NO_REPOSITORY``): a task
that could never start is refused there, in the same words, rather than
failing later on a worker.

A path is the daemon's to check but the client's to resolve: the CLI sends
it absolute, against the shell's own working directory (the daemon's is
not the caller's); a path inside a repository stands for the repository's
top level. All git runs through ``enact.tasks.host_git``.

``own_checkout`` is the git checkout enact itself runs from: the
repository an approved improvement candidate works on unless the owner
names another.
"""

from __future__ import annotations

import functools
from pathlib import Path

from enact.frozen_dataclass import dataclass
from enact.messages.common import RefusalCode, Refused
from enact.tasks.host_git import WorktreeError, git


class UnusableRepository(WorktreeError):
    """No task can work on this repository; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Checkout:
    top: Path
    """The repository's top level."""
    branch: str
    """The branch it has checked out: the one a task's review lands into."""
    head: str
    """That branch's commit."""


def checkout(path: str | Path) -> Checkout:
    """What a task on ``path`` would start from; UnusableRepository says
    why no task can (a relative path, a missing one, not a directory, not
    a git repository or one without a working tree, a detached HEAD, no
    commit yet)."""
    given = Path(path).expanduser()
    if not given.is_absolute():
        raise UnusableRepository(f"{path} is not an absolute path (the daemon cannot tell what it is relative to)")
    if not given.exists():
        raise UnusableRepository(f"{given} does not exist")
    if not given.is_dir():
        raise UnusableRepository(f"{given} is not a directory")
    try:
        top = Path(git(given, "rev-parse", "--show-toplevel").strip())
    except WorktreeError as error:
        if "not a git repository" in str(error):
            raise UnusableRepository(f"{given} is not a git repository") from None
        if "work tree" in str(error):
            raise UnusableRepository(f"{given} is a git repository without a working tree (bare)") from None
        raise UnusableRepository(str(error)) from None
    try:
        branch = git(top, "symbolic-ref", "--short", "-q", "HEAD").strip()
    except WorktreeError:
        raise UnusableRepository(f"{top} has a detached HEAD: check out the branch tasks should land into") from None
    try:
        head = git(top, "rev-parse", "--verify", "-q", "HEAD^{commit}").strip()
    except WorktreeError:
        head = ""
    if not head:
        raise UnusableRepository(f"{top} has no commit yet: commit on {branch} first")
    return Checkout(top=top, branch=branch, head=head)


def usable(repo: str) -> str | Refused:
    """The top level of ``repo``, as a task records it; else the refusal
    that says why no task can work there."""
    try:
        return str(checkout(repo).top)
    except UnusableRepository as error:
        return Refused(reason=str(error), code=RefusalCode.INVALID)


def checkout_of_package(package: Path) -> Path | None:
    """The top level of the git checkout that holds the Python package in
    directory ``package`` (tracked there, not just below it: a virtual
    environment inside some repository does not count); None when there is
    none."""
    try:
        git(package, "ls-files", "--error-unmatch", "--", "__init__.py")
        return Path(git(package, "rev-parse", "--show-toplevel").strip())
    except WorktreeError:
        return None


@functools.cache
def own_checkout() -> str:
    """The git checkout enact runs from (an editable install, ``make run``);
    "" when enact is installed from a package. Read once per process."""
    import enact

    found = checkout_of_package(Path(enact.__file__).resolve().parent)
    return "" if found is None else str(found)
