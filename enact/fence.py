"""The epoch fence: one daemon owns a home at a time.

A daemon takes ``daemon.lock`` (fcntl) and increments the generation stored in
LMDB. ``--takeover`` increments it without waiting for the lock. Every fenced
write transaction re-reads the generation inside the transaction (LMDB runs
one write transaction at a time across processes), so once a newer daemon
has committed its generation, no write of the older one can land. A monitor
notices the change within a second and cancels the old daemon's long calls.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import lmdb

from enact.cancellation import CancellationToken
from enact.errors import EnactError
from enact.home import LOCK_NAME
from enact.messages.epoch import Owner
from enact.storage import Storage, Store

log = logging.getLogger(__name__)

DATABASE = "epoch"
_OWNER = b"owner"
_GENERATION = b"generation"
_COUNTER = struct.Struct(">Q")
MONITOR_INTERVAL_S = 0.2


class FencedError(EnactError, RuntimeError):
    """This daemon no longer owns its home; the effect was not performed."""

    def __init__(self, generation: int, current: int) -> None:
        super().__init__(f"fenced: generation {generation} was superseded by generation {current}")
        self.generation = generation
        self.current = current


class AlreadyRunning(EnactError, RuntimeError):
    def __init__(self, owner: Owner | None) -> None:
        if owner is None:
            text = "enact is already running on this home"
        else:
            text = f"enact is already running on this home (pid {owner.pid}, generation {owner.generation})"
        super().__init__(text)
        self.owner = owner


@dataclass(slots=True)
class _Lock:
    file: IO[bytes]
    held: bool


class Fence:
    """The daemon's claim on its home; every effect checks it."""

    def __init__(self, home: Path, storage: Storage) -> None:
        self.home = home
        self.lock_path = home / LOCK_NAME
        self._store: Store = storage.grant("epoch", [DATABASE])
        self._table = self._store.table(DATABASE)
        self._handle = self._store.handle(DATABASE)
        self._storage = storage
        self.generation = 0
        self.token = CancellationToken()
        self._fenced_by = 0
        self._lock: _Lock | None = None
        self._monitor: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_fenced: Callable[[int], None] | None = None
        self._metrics_addr = ""
        # Set by claim: the lock was held, so this daemon replaces a live one.
        self.took_over = False

    # -- claiming the home ------------------------------------------------

    def acquire(self, *, takeover: bool, metrics_addr: str = "") -> Owner:
        """Take the lock and the next generation; raises AlreadyRunning."""
        self.claim(takeover=takeover)
        return self.take_generation(metrics_addr=metrics_addr)

    def claim(self, *, takeover: bool) -> Owner | None:
        """Take the lock if it is free. With ``takeover``, a held lock is no
        refusal: the daemon holding it is returned (its record, when it has
        one) and fenced by ``take_generation``. Raises AlreadyRunning."""
        self.home.mkdir(parents=True, exist_ok=True)
        lock_file = open(self.lock_path, "a+b")  # noqa: SIM115 - held for the daemon's lifetime
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            held = False
            if not takeover:
                lock_file.close()
                raise AlreadyRunning(self.owner()) from None
        self._lock = _Lock(file=lock_file, held=held)
        self.took_over = not held
        return None if held else self.owner()

    def take_generation(self, *, metrics_addr: str = "", above: int = 0) -> Owner:
        """Commit the next generation: from here on, an older daemon's writes
        are refused. ``above``: a generation the new one must exceed (a
        restored home's, which an older copy of the state counted past)."""
        if self._lock is None:
            raise RuntimeError("take_generation before claim")
        self._metrics_addr = metrics_addr
        owner = self._store.write(lambda txn: self._next_generation(txn, above), fenced=False)
        self.generation = owner.generation
        self._storage.set_write_guard(self.guard)
        if self._lock.held:
            self._record_pid(self._lock)
        else:
            # The old daemon still holds the lock; take it once it lets go,
            # so that a later plain `daemon run` is refused by the lock too.
            waiter = threading.Thread(target=self._wait_for_lock, args=(self._lock,), name="enact-epoch-lock")
            waiter.daemon = True
            waiter.start()
        return owner

    def supersede(self) -> int:
        """Commit the next generation without the lock, owning nothing: the
        daemon holding the home is fenced and stops (a restore replacing its
        state waits for that). Returns the generation committed."""
        return self._store.write(self._next_generation, fenced=False).generation

    def _next_generation(self, txn: lmdb.Transaction, above: int = 0) -> Owner:
        raw = txn.get(_GENERATION, db=self._handle)
        generation = max(_COUNTER.unpack(raw)[0] if raw else 0, above) + 1
        owner = Owner(
            generation=generation,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=time.time(),
            metrics_addr=self._metrics_addr,
        )
        txn.put(_GENERATION, _COUNTER.pack(generation), db=self._handle)
        self._table.put(
            txn,
            _OWNER,
            {
                "generation": owner.generation,
                "pid": owner.pid,
                "host": owner.host,
                "started_at": owner.started_at,
                "metrics_addr": owner.metrics_addr,
            },
        )
        return owner

    def _wait_for_lock(self, lock: _Lock) -> None:
        try:
            fcntl.flock(lock.file, fcntl.LOCK_EX)
        except (OSError, ValueError):  # released (closed) while waiting
            return
        lock.held = True
        if self.is_current():
            self._record_pid(lock)

    @staticmethod
    def _record_pid(lock: _Lock) -> None:
        lock.file.seek(0)
        lock.file.truncate()
        lock.file.write(f"{os.getpid()}\n".encode())
        lock.file.flush()

    def owner(self) -> Owner | None:
        document = self._store.read(lambda txn: self._table.get(txn, _OWNER))
        if document is None:
            return None
        return Owner(**document)

    def release(self) -> None:
        # The write guard stays: an actor that overran the shutdown timeout
        # may still write before storage closes, and once another daemon has
        # taken over, that write must be refused like any other.
        self._stop.set()
        if self._lock is not None:
            self._lock.file.close()
            self._lock = None

    # -- checking ---------------------------------------------------------

    def current_generation(self, txn: lmdb.Transaction | None = None) -> int:
        if txn is None:
            return self._store.read(self.current_generation)
        raw = txn.get(_GENERATION, db=self._handle)
        return int(_COUNTER.unpack(raw)[0]) if raw else 0

    def guard(self, txn: lmdb.Transaction) -> None:
        """The storage write guard: refuse the transaction once superseded."""
        current = self.current_generation(txn)
        if current != self.generation:
            self._trip(current)
            raise FencedError(self.generation, current)

    def is_current(self) -> bool:
        if self._fenced_by:
            return False
        current = self.current_generation()
        if current != self.generation:
            self._trip(current)
            return False
        return True

    @property
    def superseded(self) -> bool:
        """Whether this daemon already knows a newer one took its home over;
        reads nothing, so it can be asked while the daemon stops."""
        return bool(self._fenced_by)

    def check(self) -> None:
        """Raise FencedError unless this daemon still owns the home.

        Called right before an effect outside LMDB (a reply delivered, a
        process started); LMDB writes are fenced by ``guard`` as well."""
        if not self.is_current():
            raise FencedError(self.generation, self._fenced_by)

    def _trip(self, current: int) -> None:
        if self._fenced_by:
            return
        self._fenced_by = current
        log.warning("generation %d superseded by %d: this daemon is fenced", self.generation, current)
        self.token.cancel(f"fenced by generation {current}")
        if self._on_fenced is not None:
            self._on_fenced(current)

    def watch(self, on_fenced: Callable[[int], None]) -> None:
        """Call ``on_fenced`` once this daemon is fenced: at once when a write
        or a check runs into the fence, and within a second in any case, from
        a monitor that looks even when nothing else does."""
        self._on_fenced = on_fenced

        def run() -> None:
            while not self._stop.wait(MONITOR_INTERVAL_S):
                if not self.is_current():
                    return

        self._monitor = threading.Thread(target=run, name="enact-epoch-monitor", daemon=True)
        self._monitor.start()
        if self._fenced_by:
            on_fenced(self._fenced_by)
