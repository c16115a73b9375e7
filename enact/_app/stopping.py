"""How the daemon is asked to stop: one request, set once, by a signal, a
fatal actor, a takeover or ``enact daemon stop``; and its exit codes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pykka.debug

from enact.exit_codes import ExitCode

EXIT_OK = ExitCode.DONE
EXIT_FATAL = ExitCode.FAILED
EXIT_REFUSED = ExitCode.USAGE


@dataclass(slots=True)
class StopRequest:
    event: threading.Event = field(default_factory=threading.Event)
    exit_code: int = EXIT_OK
    reason: str = ""

    fenced: bool = False

    def set(self, reason: str, exit_code: int = EXIT_OK, *, fenced: bool = False) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.exit_code = exit_code
            self.fenced = fenced
            self.event.set()


@contextmanager
def stopped_by_signals(stop: StopRequest) -> Iterator[None]:
    """SIGTERM and SIGINT ask ``stop``; the previous handlers come back after.
    Installed before the actors start: a SIGTERM that arrives while they
    start must still stop the daemon in order, not kill it outright."""

    def on_signal(signum: int, _frame: object) -> None:
        stop.set(f"received {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    # `kill -USR1 <pid>` writes every thread's stack to the log: for a
    # daemon that seems stuck, without stopping it.
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, pykka.debug.log_thread_tracebacks)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
