"""``enact backup restore``: put a verified backup in place of a home's
state and files.

The home's lock is held throughout, so no daemon starts meanwhile. A
running daemon refuses the restore unless ``takeover``: then it is fenced
as a ``--takeover`` start fences it (a new generation in its state, which
its monitor sees within a second, and it stops) and the restore waits
for it to let go of the lock. What is replaced is kept aside, never
deleted (``<home>/replaced-<UTC time>/``: the state and the files the
backup brought back). The restored state starts at a generation above
both the backup's and the replaced state's, so a daemon of either is
fenced; the memory index is removed, to be rebuilt at the next start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from enact.backup.manifest import Manifest
from enact.backup.snapshot import DaemonRunning, name_of
from enact.backup.verify import verify
from enact.fence import AlreadyRunning, Fence
from enact.frozen_dataclass import dataclass
from enact.home import LOCK_NAME, STATE_DIR
from enact.memory.memory_actor import INDEX_DIR
from enact.storage import Storage, StorageError

LET_GO_WAIT_S = 30.0
"""How long a restore with takeover waits for the fenced daemon to stop."""
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Restored:
    manifest: Manifest
    generation: int
    """The restored home's generation: above any before it."""
    replaced: Path | None
    """Where the replaced state and files were put aside (None: there were none)."""
    took_over: bool


def restore(home: Path, backup: Path, *, takeover: bool = False) -> Restored:
    """Raises BackupError (one line) when the backup does not verify, or
    DaemonRunning when a daemon runs and ``takeover`` is not given; both
    before anything changes."""
    manifest = verify(backup).manifest
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    took_over = False
    replaced_generation = 0
    with _home_lock(home) as held:
        if not held:
            if not takeover:
                raise DaemonRunning(f"enact is running on {home}; stop it (enact daemon stop) or restore with "
                                    "--takeover")
            replaced_generation = _fence_running_daemon(home)
            took_over = True
    with _home_lock(home, wait_s=LET_GO_WAIT_S if took_over else 0.0) as held:
        if not held:
            raise DaemonRunning(f"enact still holds {home / LOCK_NAME}; nothing was restored")
        replaced_generation = max(replaced_generation, _generation_of(home / STATE_DIR))
        replaced = _put_aside(home, manifest)
        _bring_back(home, backup, manifest)
    generation = _new_generation(home, above=max(replaced_generation, manifest.generation))
    return Restored(manifest=manifest, generation=generation, replaced=replaced, took_over=took_over)


@contextlib.contextmanager
def _home_lock(home: Path, *, wait_s: float = 0.0) -> Iterator[bool]:
    """The home's lock, if it can be had within ``wait_s``: yields whether it was."""
    with open(home / LOCK_NAME, "a+b") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(_POLL_S)  # the daemon's own stop, not a clock of ours: nothing to advance
        yield True


def _fence_running_daemon(home: Path) -> int:
    """Take the next generation in the running daemon's state, as a
    ``--takeover`` start does: it is fenced and stops. Returns that generation."""
    storage = Storage(home / STATE_DIR)
    try:
        return Fence(home, storage).supersede()
    finally:
        storage.close()


def _generation_of(state: Path) -> int:
    """The generation the state to be replaced counted to; 0 when it does
    not open (a state being restored because it broke)."""
    from enact.backup.inspection import UnreadableCopy, copied_facts

    if not (state / "data.mdb").is_file():
        return 0
    with contextlib.suppress(UnreadableCopy, StorageError, OSError, ValueError):
        return copied_facts(state)[1]
    return 0


def _put_aside(home: Path, manifest: Manifest) -> Path | None:
    aside = home / f"replaced-{name_of(time.time())}"
    moved = False
    names = [STATE_DIR, *(name.removeprefix("home/").split("/")[0] for name in manifest.files
                          if name.startswith("home/"))]
    for name in dict.fromkeys(names):
        path = home / name
        if path.exists():
            aside.mkdir(mode=0o700, exist_ok=True)
            os.rename(path, aside / name)
            moved = True
    shutil.rmtree(home / INDEX_DIR, ignore_errors=True)  # derived: rebuilt from the restored state
    return aside if moved else None


def _bring_back(home: Path, backup: Path, manifest: Manifest) -> None:
    (home / STATE_DIR).mkdir(mode=0o700)
    for name in manifest.files:
        source = backup / name
        if name.startswith(f"{STATE_DIR}/"):
            target = home / name
        elif name.startswith("home/"):
            target = home / name.removeprefix("home/")
        elif name in manifest.outside:
            target = Path(manifest.outside[name])
            if target.exists():
                continue  # a secret file that is still there is the current one
        else:
            continue
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(source, target)
        target.chmod(0o600)


def _new_generation(home: Path, *, above: int) -> int:
    storage = Storage(home / STATE_DIR)
    try:
        fence = Fence(home, storage)
        try:
            fence.claim(takeover=False)
        except AlreadyRunning:
            raise DaemonRunning(f"a daemon started on {home} during the restore; its state is the restored "
                                "one") from None
        generation = fence.take_generation(above=above).generation
        fence.release()
        return generation
    finally:
        storage.close()
