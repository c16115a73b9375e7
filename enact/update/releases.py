"""Releases: each revision enact was updated to, installed under the home
beside the one running, with its own source and virtual environment.

``<home>/releases/<revision>/`` holds the revision's source (a ``git
archive`` of it, never a worktree the repository tracks) and, in
``.venv``, an environment that runs that source where it lies (an
editable install: nothing changes the source after the install, so it
is the same code a wheel would hold, without building, copying and
zipping one). The environment shares the dependencies of the environment
enact was first installed in (a ``.pth`` naming its site-packages) and pip
installs there only what that one lacks, through pip's own cache: an
install costs a couple of seconds, offline, instead of a download of every
dependency.
``<home>/releases/current`` links the environment the systemd unit starts
(``deploy/systemd/enact.service``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from enact._app.revision import RELEASE_FILE
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.tasks.host_git import WorktreeError, git

RELEASES = "releases"
CURRENT = "current"
"""The link to the environment the systemd unit starts."""
ENVIRONMENT = ".venv"
DEPENDENCIES_LINK = "_enact_shared_dependencies.pth"
PIP_TIMEOUT_S = 600.0


class ReleaseError(EnactError):
    """A release could not be installed; one line saying why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """A revision of enact and the environment that runs it."""

    revision: str
    environment: str
    """The virtual environment (its prefix): ``bin/python`` there starts it."""

    @property
    def python(self) -> str:
        return str(Path(self.environment) / "bin" / "python")

    @property
    def short(self) -> str:
        return self.revision[:12] or "unknown"

    def as_record(self) -> dict[str, str]:
        return {"revision": self.revision, "environment": self.environment}

    @classmethod
    def from_record(cls, record: dict[str, str]) -> Release:
        return cls(revision=record["revision"], environment=record["environment"])


def releases_dir(home: Path) -> Path:
    return home / RELEASES


def release_environment(home: Path) -> dict[str, str]:
    """What a release's enact runs with (its pip too, at its install): this
    environment on ``home``, without what would load another enact than the
    release's."""
    kept = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    return {**kept, "ENACT_HOME": str(home)}


def shared_site_dirs(releases: Path) -> list[str]:
    """The site-packages directories this interpreter loads its dependencies
    from, but a release's own: a new release links these, so that no chain
    of releases depends on an older release's environment."""
    found: list[str] = []
    for entry in sys.path:
        path = Path(entry)
        if path.name not in ("site-packages", "dist-packages") or not path.is_dir():
            continue
        if path.resolve().is_relative_to(releases.resolve()) or str(path) in found:
            continue
        found.append(str(path))
    return found


def install(home: Path, repository: Path, revision: str, *, log: Path) -> Release:
    """The release of ``revision`` from ``repository``, installed unless it
    already is. It is built where it stays (a virtual environment names its
    own path in its scripts) and is finished once its ``release.json`` is
    written: a release without one is an install that was cut short, made
    again from nothing. Raises ReleaseError."""
    releases = releases_dir(home)
    target = releases / revision
    environment = target / ENVIRONMENT
    release = Release(revision=revision, environment=str(environment))
    if (target / RELEASE_FILE).is_file():
        return release
    releases.mkdir(mode=0o700, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(mode=0o700)
    try:
        _unpack(repository, revision, target)
        with _compiling(target / "enact", log=log):
            _make_environment(environment, releases, log=log)
            _pip_install(environment, target, env=release_environment(home), log=log)
        _check_runs_its_own_source(environment, target, env=release_environment(home))
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    record = json.dumps({"revision": revision, "repository": str(repository), "installed_at": time.time()})
    staged = target / f".{RELEASE_FILE}.tmp"
    staged.write_text(record)
    staged.replace(target / RELEASE_FILE)
    return release


def _unpack(repository: Path, revision: str, into: Path) -> None:
    archive = into / "source.tar"
    try:
        git(repository, "archive", "--format=tar", "-o", str(archive), revision)
    except WorktreeError as error:
        raise ReleaseError(f"the source of {revision[:12]} cannot be read: {error}") from None
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")  # nothing outside the release, no device, no absolute link
    archive.unlink()


def _make_environment(environment: Path, releases: Path, *, log: Path) -> None:
    _run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(environment)], log=log)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(environment), "platbase": str(environment)}))
    purelib.mkdir(parents=True, exist_ok=True)
    (purelib / DEPENDENCIES_LINK).write_text("".join(f"{path}\n" for path in shared_site_dirs(releases)))


def _pip_install(environment: Path, source: Path, *, env: dict[str, str], log: Path) -> None:
    """The release's interpreter runs pip (the shared one, through the
    ``.pth``): one pip process, not one that starts another as ``--python``
    does. It sees the shared dependencies, so only what they lack is
    fetched; the editable build uses the shared setuptools
    (``--no-build-isolation``), which needs no index either."""
    python = environment / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--disable-pip-version-check",
          "--config-settings", "editable_mode=compat", "--editable", str(source)], log=log, cwd=source, env=env)


def _check_runs_its_own_source(environment: Path, source: Path, *, env: dict[str, str]) -> None:
    """The release imports enact from its own source, not from the shared
    site-packages it also sees (where enact's first environment may hold
    an installed enact): the editable install's path entry must come first."""
    python = environment / "bin" / "python"
    done = subprocess.run([str(python), "-P", "-c", "import enact; print(enact.__file__)"], cwd=environment, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    found = done.stdout.strip()
    if done.returncode != 0 or not Path(found).resolve().is_relative_to(source.resolve()):
        raise ReleaseError(f"the release imports enact from {found or 'nowhere'}, not from its own source {source}")


@contextlib.contextmanager
def _compiling(package: Path, *, log: Path) -> Iterator[None]:
    """The release's bytecode, compiled while its environment is made (on
    the other core) and done before the release is. Not left to its first
    start: with PYTHONDONTWRITEBYTECODE set (as on some machines) no start
    would ever write it, and each would compile every module it imports.
    The release runs this same interpreter, so the cache tag is its own. A
    failed compile costs only start-up time, never the install."""
    with open(log, "ab") as output:
        compiler = subprocess.Popen([sys.executable, "-m", "compileall", "-q", str(package)],
                                    stdin=subprocess.DEVNULL, stdout=output, stderr=output)
    try:
        yield
    finally:
        try:
            compiler.wait(timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            compiler.kill()
            compiler.wait()


def _run(argv: list[str], *, log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    with open(log, "ab") as output:
        output.write(f"$ {' '.join(argv)}\n".encode())
        output.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                  timeout=PIP_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ReleaseError(f"`{argv[2]}` did not finish within {PIP_TIMEOUT_S:g} s (see {log})") from None
    if done.returncode != 0:
        raise ReleaseError(f"`{' '.join(argv[2:4])}` failed with status {done.returncode} (see {log})")


def current(home: Path) -> Path | None:
    """The environment the systemd unit starts, None before any update."""
    link = releases_dir(home) / CURRENT
    return Path(os.readlink(link)) if link.is_symlink() else None


def make_current(home: Path, release: Release) -> None:
    """Point ``current`` at ``release``'s environment, atomically (a new
    link renamed over the old)."""
    releases = releases_dir(home)
    releases.mkdir(mode=0o700, exist_ok=True)
    staged = releases / f".{CURRENT}.{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(release.environment)
    staged.replace(releases / CURRENT)


def prune(home: Path, keep: Iterable[Release]) -> list[str]:
    """Delete every release but those in ``keep`` (the one serving and the
    one ``update rollback`` would return to); returns the revisions deleted.
    An environment outside the releases (enact's first) is never touched."""
    kept = {Path(release.environment).parent.name for release in keep}
    deleted = []
    for entry in sorted(releases_dir(home).iterdir()) if releases_dir(home).is_dir() else []:
        if entry.name == CURRENT or entry.name.startswith(".") or entry.name in kept or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        deleted.append(entry.name)
    return deleted
