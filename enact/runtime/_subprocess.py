"""Run a model CLI (or any long command) so that nothing outlives the call.

The command runs through ``sh`` (the library) in a session of its own, so
its process group holds it and every child it starts. The prompt goes on
standard input. On timeout or cancellation the group gets SIGTERM, and 5 s
later SIGKILL if anything is left; the caller does not wait for that grace
period (a cancelled call returns within a second), a reaper thread does.
When the command ends by itself, whatever it left behind in its group is
killed too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sh

from enact.cancellation import CancellationToken
from enact.process import program_ended, program_started
from enact.runtime import RuntimeCancelled, RuntimeTimeout, RuntimeUnavailable

TERM_GRACE_S = 5.0
"""How long a terminated group has to exit before it is killed."""

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandOutput:
    exit_code: int
    """Negative: killed by that signal (as ``subprocess`` reports it)."""
    stdout: str
    stderr: str
    duration_s: float


def run_command(
    argv: Sequence[str],
    *,
    stdin_text: str,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout_s: float,
    cancel: CancellationToken,
    tty_out: bool = True,
) -> CommandOutput:
    """Run ``argv`` to its end and return what it printed, whatever its exit
    code. Raises RuntimeUnavailable when the program is not found,
    RuntimeTimeout after ``timeout_s``, RuntimeCancelled when ``cancel``
    fires; in those two cases the group is terminated (see the module doc).
    ``tty_out=False`` gives the command a pipe for its output instead of a
    terminal, for a program that decorates what it prints to a terminal."""
    if cancel.cancelled:
        raise RuntimeCancelled(cancel.reason)
    try:
        program = sh.Command(argv[0])
    except sh.CommandNotFound:
        raise RuntimeUnavailable(f"{argv[0]}: no such program") from None
    wake = threading.Event()
    started = program_started(argv)
    try:
        running = program(
            *argv[1:],
            _in=stdin_text,
            _cwd=str(cwd) if cwd is not None else None,
            _env=dict(env) if env is not None else None,
            _bg=True,
            _bg_exc=False,
            _new_session=True,
            _tty_out=tty_out,
            _preexec_fn=_die_with_parent(os.getpid()),
            _done=lambda *_: wake.set(),
        )
    except (OSError, sh.ForkException) as error:
        program_ended(argv, started, "could not start")
        raise RuntimeUnavailable(f"{argv[0]} cannot be started: {error}") from None
    group = running.process.pid  # the session leader: its pid is the group id
    cancel.on_cancel(lambda _: wake.set())
    finished = wake.wait(timeout_s) and not running.process.is_alive()[0]
    if not finished:
        _terminate(group, lambda: not running.process.is_alive()[0])
        if cancel.cancelled:
            program_ended(argv, started, "was cancelled")
            raise RuntimeCancelled(f"{argv[0]} was cancelled: {cancel.reason}")
        program_ended(argv, started, f"timed out after {timeout_s:g} s")
        raise RuntimeTimeout(f"{argv[0]} timed out after {timeout_s:g} s")
    exit_code, stdout, stderr = _collect(running)
    _kill_group(group)  # what it left behind
    program_ended(argv, started, exit_code)
    return CommandOutput(
        exit_code=exit_code,
        stdout=stdout.decode(errors="replace"),
        stderr=stderr.decode(errors="replace"),
        duration_s=time.monotonic() - started,
    )


def _collect(running: Any) -> tuple[int, bytes, bytes]:
    try:
        running.wait()
    except sh.ErrorReturnCode as failed:
        return failed.exit_code, failed.stdout, failed.stderr
    return running.exit_code, running.stdout, running.stderr


def group_alive(group: int) -> bool:
    """Whether any process of the group still exists (zombies count)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def _terminate(group: int, leader_gone: Callable[[], bool]) -> None:
    """SIGTERM now; SIGKILL from a reaper thread after the grace period if
    the leader or any member of the group is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)

    def reap() -> None:
        deadline = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < deadline:
            if leader_gone() and not _members_left(group):
                return
            time.sleep(0.05)
        _kill_group(group)

    threading.Thread(target=reap, name=f"reap-group-{group}", daemon=True).start()


def _members_left(group: int) -> bool:
    """Live (not zombie) processes in the group, read from /proc: once the
    leader is reaped, ``killpg(group, 0)`` alone cannot tell a zombie child
    awaiting its parent from a running one."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            return True
    return False


def _die_with_parent(parent: int) -> Callable[[], None]:
    """The group leader gets SIGTERM when the thread that started it ends:
    that thread waits for the call, so this fires only when the daemon dies
    mid-call (the leader's own children are its to pass the signal on)."""

    def in_child() -> None:
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return in_child
