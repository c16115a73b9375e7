"""Run a model CLI (or any long command) so that nothing outlives the call.

The command runs in a session of its own, so its process group holds it and
every child it starts. The prompt goes on standard input. On timeout or
cancellation the group gets SIGTERM, and 5 s later SIGKILL if anything is
left; the caller does not wait for that grace period (a cancelled call
returns within a second), a reaper thread does. When the command ends by
itself, whatever it left behind in its group is killed too.

Started with ``subprocess``, not ``sh``: a program costs what starting it
costs. ``sh`` forks the daemon in Python (a fork costs 4 to 8 ms here, then
the child runs Python to close descriptors one by one), gives every command
three threads that notice its end by polling (0.1 s and 1 s intervals), and
by default a terminal; that added 11 to 41 ms to each of the dozens of
programs a task starts (bench row 7), whatever options it was given.
``subprocess`` starts the program with vfork (no ``preexec_fn``: see
``dying_with_parent``), and the calling thread alone waits, in one ``poll``
on the pipes, a pidfd that becomes readable when the leader exits, and an
eventfd that a cancellation writes to.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from enact.cancellation import CancellationToken
from enact.frozen_dataclass import dataclass
from enact.one_cpu import unpinned
from enact.process import dying_with_parent, program_ended, program_started
from enact.runtime import RuntimeCancelled, RuntimeTimeout, RuntimeUnavailable

TERM_GRACE_S = 5.0
"""How long a terminated group has to exit before it is killed."""

DRAIN_S = 2.0
"""After the leader exits (and its group is killed), how long a process
outside the group may keep the output pipes open before what was read is
returned without waiting for their end."""

_CHUNK = 65536


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
) -> CommandOutput:
    """Run ``argv`` to its end and return what it printed, whatever its exit
    code. Raises RuntimeUnavailable when the program is not found,
    RuntimeTimeout after ``timeout_s``, RuntimeCancelled when ``cancel``
    fires; in those two cases the group is terminated (see the module doc).
    Output goes to pipes, never a terminal (a program decorates what it
    prints to one)."""
    if cancel.cancelled:
        raise RuntimeCancelled(cancel.reason)
    executable = shutil.which(argv[0])
    if executable is None:
        raise RuntimeUnavailable(f"{argv[0]}: no such program")
    started = program_started(argv)
    command, preexec = dying_with_parent([executable, *argv[1:]])
    try:
        with unpinned():
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                start_new_session=True, preexec_fn=preexec,
            )
    except (OSError, subprocess.SubprocessError) as error:
        program_ended(argv, started, "could not start")
        raise RuntimeUnavailable(f"{argv[0]} cannot be started: {error}") from None
    group = process.pid  # the session leader: its pid is the group id
    try:
        with _Wake() as wake:
            cancel.on_cancel(wake.poke)
            outcome = _Exchange(process, stdin_text.encode()).run(wake.fd, cancel, deadline=started + timeout_s)
    except BaseException:  # not expected (out of descriptors, say); the group must not be left running
        _terminate(group, process)
        program_ended(argv, started, "was abandoned")
        raise
    if outcome is None:
        _terminate(group, process)
        if cancel.cancelled:
            program_ended(argv, started, "was cancelled")
            raise RuntimeCancelled(f"{argv[0]} was cancelled: {cancel.reason}")
        program_ended(argv, started, f"timed out after {timeout_s:g} s")
        raise RuntimeTimeout(f"{argv[0]} timed out after {timeout_s:g} s")
    exit_code = process.wait()
    program_ended(argv, started, exit_code)
    stdout, stderr = outcome
    return CommandOutput(
        exit_code=exit_code,
        stdout=stdout.decode(errors="replace"),
        stderr=stderr.decode(errors="replace"),
        duration_s=time.monotonic() - started,
    )


class _Wake:
    """An eventfd a cancellation writes to; writes after ``close`` are
    dropped, so a token that outlives the call never touches a reused fd."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._lock = threading.Lock()
        self._open = True

    def poke(self, _reason: str = "") -> None:
        with self._lock:
            if self._open:
                os.eventfd_write(self.fd, 1)

    def __enter__(self) -> _Wake:
        return self

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._open = False
            os.close(self.fd)


class _Exchange:
    """Feeds a started process its standard input and reads its output until
    it exits; one ``poll`` in the calling thread, no thread of its own."""

    def __init__(self, process: subprocess.Popen[bytes], stdin: bytes) -> None:
        self.process = process
        self.pending = memoryview(stdin)
        self.pipes = [pipe for pipe in (process.stdin, process.stdout, process.stderr) if pipe is not None]
        self.stdin, self.stdout, self.stderr = (pipe.fileno() for pipe in self.pipes)  # all three are PIPE
        self.read: dict[int, bytearray] = {self.stdout: bytearray(), self.stderr: bytearray()}
        self.poller = select.poll()

    def run(self, wake: int, cancel: CancellationToken, *, deadline: float) -> tuple[bytes, bytes] | None:
        """Both outputs once the leader has exited, or None on cancellation
        or at ``deadline`` (the process still runs)."""
        leader = os.pidfd_open(self.process.pid)
        try:
            for fd in (leader, wake, self.stdout, self.stderr):
                self.poller.register(fd, select.POLLIN)
            if self.pending:
                os.set_blocking(self.stdin, False)
                self.poller.register(self.stdin, select.POLLOUT)
            else:
                self.pipes[0].close()
            reading, drain_until = {self.stdout, self.stderr}, None
            while reading or drain_until is None:
                now = time.monotonic()
                if cancel.cancelled or (drain_until is None and now >= deadline):
                    return None
                if drain_until is not None and now >= drain_until:
                    break  # a process outside the group holds the pipes
                wait_until = deadline if drain_until is None else drain_until
                for fd, _ in self.poller.poll((wait_until - now) * 1000):
                    if fd == leader:
                        # Exited, not reaped yet: its pid (the group id) cannot
                        # have been reused, so what it left behind is killed, and
                        # the pipes that held end with it.
                        _kill_group(self.process.pid)
                        self.poller.unregister(leader)
                        drain_until = time.monotonic() + DRAIN_S
                    elif fd == self.stdin:
                        self._feed()
                    elif fd in reading and not self._read(fd):
                        self.poller.unregister(fd)
                        reading.discard(fd)
            return bytes(self.read[self.stdout]), bytes(self.read[self.stderr])
        finally:
            os.close(leader)
            for pipe in self.pipes:
                with contextlib.suppress(OSError):
                    pipe.close()

    def _read(self, fd: int) -> bool:
        """False at the end of the stream."""
        chunk = os.read(fd, _CHUNK)
        self.read[fd] += chunk
        return bool(chunk)

    def _feed(self) -> None:
        try:
            written = os.write(self.stdin, self.pending[:_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the program closed its end: the rest is not for it
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.poller.unregister(self.stdin)
            with contextlib.suppress(OSError):
                self.pipes[0].close()


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


def _terminate(group: int, leader: subprocess.Popen[bytes]) -> None:
    """SIGTERM now; SIGKILL from a reaper thread after the grace period if
    the leader or any member of the group is left. The leader is reaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)

    def reap() -> None:
        deadline = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < deadline:
            if leader.poll() is not None and not _members_left(group):
                return
            time.sleep(0.05)
        _kill_group(group)
        leader.wait()

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
