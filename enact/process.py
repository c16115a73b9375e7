"""The daemon's process and its host: log set-up (and the lines every
program the daemon runs leaves in it), systemd's readiness protocol, and the
final exit."""

from __future__ import annotations

import functools
import logging
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

log = logging.getLogger("enact.daemon")
program_log = logging.getLogger("enact.program")
"""Where each program the daemon runs (git, a model CLI, an owner's program)
is logged: its start at debug, its end with its exit status at info."""

_SHOWN_COMMAND = 120
"""How much of a command line a program's log line shows."""


def exit_process(code: int) -> NoReturn:
    """End the daemon's process once ``run`` has returned. Threads that
    overran the stop (a delivery program still running, an actor of a fenced
    daemon) must not keep it alive, so the process ends here without waiting
    for them; everything durable was committed before ``run`` returned."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The ``sh`` library logs every process it starts at info and its pipes'
    # traffic at debug; enact logs each program's start and end itself
    # (``program_started``, ``program_ended``), so only its warnings stay.
    logging.getLogger("sh").setLevel(logging.WARNING)


def program_started(argv: Sequence[str]) -> float:
    """Log at debug that ``argv`` starts; the monotonic time it did, for
    ``program_ended``."""
    program_log.debug("%s started", _shown(argv))
    return time.monotonic()


def program_ended(argv: Sequence[str], started: float, outcome: int | str) -> None:
    """Log at info how ``argv`` ended: an exit status (negative: killed by
    that signal, as ``subprocess`` reports it) or words such as "timed out
    after 5 s"."""
    if isinstance(outcome, int):
        outcome = f"was killed by signal {-outcome}" if outcome < 0 else f"exited with status {outcome}"
    program_log.info("%s %s after %.2f s", _shown(argv), outcome, time.monotonic() - started)


def dying_with_parent(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``argv`` made to get SIGTERM when the thread that starts it ends
    (``PR_SET_PDEATHSIG``), and the ``preexec_fn`` that needs (None, as a
    rule). A program is started and waited for by the same thread, so the
    signal comes only when the daemon dies mid-call.

    util-linux's ``setpriv --pdeathsig`` arms it and executes the program:
    a ``preexec_fn`` would make ``subprocess`` fork the daemon instead of
    vfork it, and a fork costs 4 to 8 ms here (every page the daemon then
    writes is copied) against 1 ms for ``setpriv``'s own start. Where
    ``setpriv`` is missing the ``preexec_fn`` does it. Neither can cover a
    daemon killed in the millisecond before the signal is armed; a wrapper
    that can check its parent does (``enact.programs``)."""
    setpriv = _setpriv()
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "TERM", "--", *argv], None
    prctl, parent = _prctl(), os.getpid()

    def in_child() -> None:
        # Only a call into an already loaded function here: the child of a
        # threaded process must not take locks (the loader's, malloc's).
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return list(argv), in_child


_PR_SET_PDEATHSIG = 1


@functools.cache
def _setpriv() -> str | None:
    import shutil  # here: only the daemon starts programs, the CLI's start-up does not pay for it

    return shutil.which("setpriv")


@functools.cache
def _prctl() -> Any:
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


def _shown(argv: Sequence[str]) -> str:
    command = shlex.join(argv)
    return command if len(command) <= _SHOWN_COMMAND else command[: _SHOWN_COMMAND - 1] + "…"


def main_pid() -> bytes:
    """The sd_notify line naming this process as the unit's main one."""
    return f"MAINPID={os.getpid()}".encode()


def notify_systemd(state: bytes) -> None:
    """sd_notify without a dependency: one datagram to $NOTIFY_SOCKET."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state)
    except OSError as error:
        log.warning("could not notify systemd: %s", error)
