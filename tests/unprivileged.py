"""Run a real daemon as an unprivileged user, for tests that must hold for
any uid the daemon has (CI runs as root).

As root, ``throwaway_user`` adds a user of its own (``enact-probe-<hex>``)
and removes it afterwards; ``start_as`` starts ``enact daemon run`` as that
user (``setpriv``) on a home in a directory the user owns, and the returned
``Daemon``'s ``cli`` runs the CLI as that user too, so nothing in the home
ends up owned by root. Not root, the current user is unprivileged already:
``throwaway_user`` yields None and ``start_as`` starts the daemon as it is.

A daemon test that must hold for both is parametrized over ``WHO`` and
takes its ``Place`` from ``place_for``: where to make its repositories,
its home, the python its repositories' doctors run, and ``start``, the one
way to start its daemon (as the user, once what the test made there is
given to them).

The interpreter of the tests may live where the user cannot reach (a
pyenv under a 0700 /root): the user runs the system's python of the same
version on this checkout and the virtualenv's packages (``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from task_repos import pytest_doctor

from conftest import Daemon, DaemonFactory, enact_env

ROOT = Path(__file__).resolve().parent.parent

USERS_ROOT = Path("/var/tmp/enact-test-users")
"""Where each throwaway user gets a directory of its own: outside /tmp, as a
real owner's home and repositories are (a confined task's /tmp is a private
one, so a probe of a path there proves nothing), and within reach of any
user wherever the checkout is (a checkout under /tmp keeps the CLI homes
under root's own 0700 home)."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: int
    gid: int
    base: Path
    """A directory the user owns (0700) outside /tmp, removed with the user."""

    def own(self, path: Path) -> Path:
        """Give ``path`` (and all below it) to the user."""
        subprocess.run(["chown", "-R", f"{self.uid}:{self.gid}", str(path)], check=True)
        return path

    def prefix(self) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]


def need_root(what: str) -> None:
    """Skip unless root; under CI (``CI=true``), where tests run as root,
    not being root is a failure instead."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} needs root, and CI runs as root")
    pytest.skip(f"{what} needs root (run as root, as CI does)")


@contextmanager
def throwaway_user() -> Iterator[User | None]:
    """A new unprivileged user with a directory of its own (None when not root)."""
    if os.geteuid() != 0:
        yield None
        return
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("useradd and setpriv are needed to run a daemon as an unprivileged user")
    name = f"enact-probe-{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    USERS_ROOT.mkdir(parents=True, exist_ok=True)
    USERS_ROOT.chmod(0o755)
    base = Path(tempfile.mkdtemp(prefix="enact-u-", dir=USERS_ROOT))
    try:
        entry = pwd.getpwnam(name)
        user = User(name, entry.pw_uid, entry.pw_gid, base)
        user.own(base)
        yield user
    finally:
        # Its processes first (all of them the test's): userdel refuses a
        # user that still runs any.
        for pid in _processes_of(entry.pw_uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["userdel", name], capture_output=True)


WHO = ("root", "unprivileged")
"""The users a daemon test runs as: ``@pytest.mark.parametrize("who", WHO)``."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where a test runs its daemon as ``user`` (None: as this process's)."""

    user: User | None
    base: Path
    """Where the test makes its repositories and files, the user's."""
    home: Path
    """The daemon's ENACT_HOME, the user's."""
    python: str
    """A python the user runs, with pytest when ``env`` is passed through
    to the task (``ENACT_TASKS_ENV_PASSTHROUGH=PYTHONPATH``)."""
    env: dict[str, str]

    @property
    def pytest(self) -> str:
        """A doctor command running the repository's tests with pytest."""
        return pytest_doctor(self.python)

    def start(self, daemons: DaemonFactory, env: dict[str, str] | None = None) -> Daemon:
        """Give what the test made in its place to the user, then start the
        daemon on ``home`` as the user (``start_as``)."""
        if self.user is not None:
            self.user.own(self.base)
            self.user.own(self.home)
        return start_as(self.user, daemons, self.home, {**self.env, **(env or {})})


@contextmanager
def place_for(who: str, daemons: DaemonFactory, base: Path, *, home_in_base: bool = False) -> Iterator[Place]:
    """The place of a test run as ``who`` (one of ``WHO``): as root (skipped
    unless root, see ``need_root``) in ``base`` (a test's ``tmp_path``) with
    a home of the factory's, or ``base / "h"`` when ``home_in_base``; as a
    throwaway user in a directory of theirs outside /tmp (or, not root, as
    this process's user, as root would be)."""
    if who == "root":
        need_root("the as-root variant")
    with throwaway_user() if who == "unprivileged" else contextlib.nullcontext() as user:
        if user is None:
            home = base / "h" if home_in_base else daemons.new_home()
            home.mkdir(mode=0o700, exist_ok=True)
            yield Place(None, base, home, sys.executable, {})
            return
        # Not this interpreter, even when the user reaches it: a confined
        # task may not (bwrap refused one under root's 0700 home, measured).
        python = _system_python("the user's task commands need a python of theirs")
        _traversable_checkout()
        passed = {"ENACT_TASKS_ENV_PASSTHROUGH": "PYTHONPATH", "PYTHONPATH": sysconfig.get_paths()["purelib"]}
        yield Place(user, user.base, new_home(user), python, passed)


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
    return found


def _traversable_checkout() -> None:
    """Let any user pass through the directories above the checkout (the
    execute bit only: nothing is listed) and read the checkout itself (an
    import lists the directories on the path): a clone made in ``mktemp -d``
    sits in a 0700 directory, and the user must import enact and its
    packages from the checkout and its virtualenv."""
    for directory, needed in ((ROOT, stat.S_IROTH | stat.S_IXOTH), *((up, stat.S_IXOTH) for up in ROOT.parents)):
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & needed != needed:
            directory.chmod(mode | needed)


def _python_for(user: User) -> tuple[list[str], dict[str, str]]:
    """How the user runs enact: this interpreter if it can reach it, else
    the system's python of the same version with our packages on its path."""
    _traversable_checkout()
    reachable = subprocess.run([*user.prefix(), sys.executable, "-c", "import enact"], cwd="/",
                               capture_output=True, env=_user_env(user, {}))
    if reachable.returncode == 0:
        return [sys.executable], {}
    return [_system_python(f"{sys.executable} is out of an unprivileged user's reach")], \
        {"PYTHONPATH": f"{sysconfig.get_paths()['purelib']}:{ROOT}"}


def _system_python(why: str) -> str:
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    if system is None:
        pytest.skip(f"{why} and no system python {sys.version_info.major}.{sys.version_info.minor} is installed")
    return system


def _user_env(user: User, env: dict[str, str]) -> dict[str, str]:
    return {**env, "HOME": str(user.base), "USER": user.name, "LOGNAME": user.name}


class UserDaemon(Daemon):
    """A daemon run as ``user``; its CLI runs as that user too."""

    def __init__(self, user: User, python: list[str], extra: dict[str, str], *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.user, self.python, self.extra = user, python, extra

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.user.prefix(), *self.python, "-m", "enact", *args], cwd=cwd or "/",
                              env=_user_env(self.user, enact_env(self.home, {**self.extra, **(env or {})})),
                              capture_output=True, text=True, timeout=timeout)


def new_home(user: User) -> Path:
    home = user.base / "h"
    home.mkdir(mode=0o700)
    return user.own(home)


def start_as(user: User | None, daemons: DaemonFactory, home: Path, env: dict[str, str]) -> Daemon:
    """Start ``enact daemon run`` on ``home`` as ``user`` (as this process's
    user when None); the factory kills it at the end of the test."""
    if user is None:
        return daemons.start(home, env=env)
    python, extra = _python_for(user)
    log = user.base / f"daemon-{len(daemons.started)}.log"
    full = _user_env(user, enact_env(home, {"ENACT_DAEMON_COMMAND_SERVER": "false", **extra, **env}))
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [*user.prefix(), *python, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0"],
            env=full, cwd="/", stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT)
    daemon = UserDaemon(user, python, extra, home, process, log)
    daemons.started.append(daemon)
    daemon.wait_ready()
    return daemon
