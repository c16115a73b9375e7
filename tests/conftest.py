"""Shared pytest fixtures."""

from __future__ import annotations

import compileall
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fact_books import FactBooks

import enact
from enact.cli._client import DaemonError, NotRunning, request, send
from enact.messages.control import Status, StatusReport

# --- the environment: the developer's own enact settings stay out -----------
# enact reads ENACT_* variables as configuration and refuses unknown ones, so a
# variable set for the developer's daemon (or by a CI script) would change or
# break every configuration the tests load. Tests that want one set it.
for _name in [name for name in os.environ if name.startswith("ENACT_")]:
    del os.environ[_name]

# --- bytecode: every enact process the tests start reads it, none compiles ----
# The environment may set PYTHONDONTWRITEBYTECODE (this machine's does), and
# the editable install leaves enact's source uncompiled: each daemon and CLI
# process the tests start would then compile every enact module it imports
# (about a quarter of a daemon's start-up CPU, a fifth of a command's). An
# installed enact has its bytecode; compiled once here, so do the tests'.


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller compiled before it started them
    compileall.compile_dir(Path(enact.__file__).resolve().parent, quiet=1)
    # the tests' own helper modules too (some run in subprocesses), not the
    # fixture packages below them, which tests install as they are
    compileall.compile_dir(Path(__file__).resolve().parent, maxlevels=0, quiet=1)
    _rewrite_test_modules_once(session.config)


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """pytest rewrites the asserts of each test module it imports (about 6 s
    of CPU for this suite) and keeps the result beside the module, unless
    bytecode is not to be written: then every xdist worker rewrites every
    module again. Rewritten here, once, where pytest itself looks for it
    (``tests/__pycache__``, tagged with pytest's version; a changed module
    is rewritten again). Through pytest's own rewriter, whose functions are
    private: should they change, the workers rewrite as before."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for module in sorted(Path(__file__).resolve().parent.glob("*.py")):
            if not (module.name.startswith("test_") or module.name == "conftest.py"):
                continue
            pyc = rewrite.get_cache_dir(module) / (module.stem + rewrite.PYC_TAIL)
            if rewrite._read_pyc(module, pyc, state.trace) is None:
                source_hash, code = rewrite._rewrite_test(module, config)
                if not rewrite.try_makedirs(pyc.parent) or not rewrite._write_pyc(state, code, source_hash, pyc):
                    return
    except (ImportError, AttributeError, KeyError, TypeError):
        return


# --- end bytecode -------------------------------------------------------------


# --- order: the modules with the longest tests first ----------------------------
# The workers share the tests out in collection order and steal from the end
# of each other's queues; a long test among the last keeps one worker busy
# while the others have nothing left. Alphabetically these modules fall late
# (test_task_*, test_telegram, test_update) or anywhere; run first, they
# overlap the many short tests instead. Measured: each holds single tests of
# 10 s or more on a quiet machine. Within a module the order stays as written
# (a module's shared daemon is started once per worker that runs its tests).

LONGEST_FIRST = (
    "test_update.py", "test_task_ray.py", "test_takeover.py", "test_task_protected_daemon.py",
    "test_task_git_real_clis.py", "test_task_workers.py", "test_bench_smoke.py", "test_memory_forget_complete.py",
    "test_deploy.py",
    "test_task_experience.py", "test_task_workers_real_clis.py", "test_memory_authority_daemon.py",
    "test_task_branches.py", "test_lineage_daemon.py", "test_telegram.py", "test_task_runtime_commands.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# --- end order ------------------------------------------------------------------


# --- require_binary: external tools needed by a test -------------------------
# A missing tool skips the test on a developer machine, but under CI=true it is
# a failure: CI installs these tools, and a skip there would hide a broken check.


def _require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name!r} is not on PATH"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true requires it", pytrace=False)
    pytest.skip(f"{reason}; install it to run this test")


@pytest.fixture
def require_binary() -> Callable[[str], str]:
    """Return a function that gives the path of a tool or skips/fails the test."""
    return _require_binary


# --- end require_binary -------------------------------------------------------


# --- real_cli: the pinned model CLIs that `make tools` installs ----------------

TOOLS_BIN = Path(__file__).resolve().parent.parent / ".tools" / "node_modules" / ".bin"


def real_cli(name: str) -> str:
    """The path of the real ``codex`` or ``claude`` CLI; skips the test when
    it is not installed, fails it under CI=true."""
    path = TOOLS_BIN / name
    if path.exists():
        return str(path)
    reason = f"{name!r} is not installed in {TOOLS_BIN}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true requires it (run `make tools`)", pytrace=False)
    pytest.skip(f"{reason}; run `make tools`")


# --- end real_cli -----------------------------------------------------------------


# --- running daemons ------------------------------------------------------------
# End-to-end tests start real `enact daemon run` processes on a home in a short
# temporary directory (a Unix socket path must fit in 107 bytes).

def enact_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env["ENACT_HOME"] = str(home)
    env.update(extra or {})
    return env


def run_cli(home: Path, *args: str, env: dict[str, str] | None = None, input: str | None = None,
            timeout: float = 60, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `enact ARGS` as its own process against ``home``, in ``cwd``."""
    if cwd is not None:  # elsewhere, `python -m` would not find this checkout's enact first
        env = {"PYTHONPATH": str(Path(enact.__file__).resolve().parents[1]), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "enact", *args],
        cwd=cwd,
        env=enact_env(home, env),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


READY_POLL_S = 0.01
"""How often a start is checked for readiness: a refused connect costs
microseconds, and every test that starts a daemon waits out the part of an
interval it overshoots."""


class DaemonExited(AssertionError):
    """The daemon a test waits for ended instead."""


class Daemon:
    """One `enact daemon run` process."""

    def __init__(self, home: Path, process: subprocess.Popen[bytes], log: Path) -> None:
        self.home = home
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 60) -> StatusReport:
        # (a deadline for a failure, not a speed asked of a start: with more
        # workers than cores, a start may queue behind several others)
        ready: list[StatusReport] = []

        def answers() -> bool:
            if self.process.poll() is not None:
                raise DaemonExited(f"daemon exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                report = request(self.home, Status(brief=True), timeout=2)
            except (NotRunning, OSError):
                return False
            except DaemonError as error:  # in a takeover: the old daemon, stopping, until the new one binds
                if "is stopping" not in str(error):
                    raise
                return False
            if isinstance(report, StatusReport) and report.pid == self.pid:
                ready.append(report)
            return bool(ready)

        try:
            wait_for(answers, timeout=timeout, what="the daemon to answer", every=READY_POLL_S)
        except DaemonExited:
            raise
        except AssertionError:  # wait_for's time-out: with what the daemon said
            raise AssertionError(f"daemon not ready within {timeout} s:\n{self.log_text()}") from None
        return ready[0]

    def request(self, message: object, timeout: float = 60) -> object:
        return send(self.home, message, timeout=timeout)

    def task_state(self, task_id: int) -> str:
        """The state of task ``task_id`` ("" if there is none), asked from
        this process: what a wait for a task polls. Through the CLI each poll
        would start a process (a fifth of a CPU-second); the test asserts
        through the CLI once the wait is over."""
        from enact.messages.tasks import Found, Get

        found = request(self.home, Get(task_id=task_id))
        return str(found.task.state) if isinstance(found, Found) else ""

    def cli(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_cli(self.home, *args, env=env, timeout=timeout, cwd=cwd)

    def cli_json(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
        result = self.cli(*args, env=env, cwd=cwd)
        assert result.returncode == 0, result.stderr
        return orjson.loads(result.stdout)

    def wait_exit(self, timeout: float = 30) -> int:
        return self.process.wait(timeout=timeout)

    def terminate(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill9(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class DaemonFactory:
    def __init__(self) -> None:
        self.started: list[Daemon] = []
        self._dirs: list[tempfile.TemporaryDirectory[str]] = []

    def new_home(self) -> Path:
        directory = tempfile.TemporaryDirectory(prefix="enact-", dir="/tmp")
        self._dirs.append(directory)
        home = Path(directory.name) / "h"
        home.mkdir(mode=0o700)
        return home

    def start(self, home: Path | None = None, *args: str, env: dict[str, str] | None = None,
              wait: bool = True, cwd: Path | None = None) -> Daemon:
        """Start `enact daemon run` on ``home`` (a new one by default), in
        ``cwd``: ``python -m`` runs the enact found there first."""
        home = home or self.new_home()
        log = home.parent / f"daemon-{len(self.started)}.log"
        # The command server costs each daemon half a second of CPU at start:
        # only the tests that ask for it (test_command_server.py) get one.
        # The web console likewise (its server and framework cost an import at start): the console's tests
        # turn it on, on a free port.
        env = {"ENACT_DAEMON_COMMAND_SERVER": "false", "ENACT_CONSOLE_ENABLED": "false", **(env or {})}
        with open(log, "wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0", *args],
                env=enact_env(home, env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        daemon = Daemon(home, process, log)
        self.started.append(daemon)
        if wait:
            daemon.wait_ready()
        return daemon

    def close(self) -> None:
        for daemon in self.started:
            if daemon.process.poll() is None:
                daemon.process.kill()
                daemon.process.wait(timeout=10)
        for directory in self._dirs:
            directory.cleanup()


@pytest.fixture
def daemons() -> Iterator[DaemonFactory]:
    """Start real daemon processes; all are killed at the end of the test."""
    factory = DaemonFactory()
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="module")
def module_daemons() -> Iterator[DaemonFactory]:
    """Daemons that a module's tests share, killed once the module is done:
    for tests whose writes none of the others reads (a daemon's start costs
    more than most tests that use it)."""
    factory = DaemonFactory()
    try:
        yield factory
    finally:
        factory.close()


def wait_for(predicate: Callable[[], object], timeout: float = 60, what: str = "condition",
             every: float = 0.05) -> None:
    """Poll ``predicate`` every ``every`` seconds until it holds, or fail
    naming ``what`` (the timeout only bounds a failure, so it leaves room for
    a busy machine). A finer ``every`` for a state that does not last long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


# --- end running daemons --------------------------------------------------------


@pytest.fixture
def books(tmp_path: Path) -> Iterator[FactBooks]:
    """``books(facts)``: a memory fact book holding ``facts``, on real LMDB."""
    made = FactBooks(tmp_path / "books")
    try:
        yield made
    finally:
        made.close()
