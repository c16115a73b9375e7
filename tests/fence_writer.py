"""A helper process for test_epoch_fence: holds a Fence on a home and writes.

    python fence_writer.py HOME write     take the home, then append fenced
                                          records until fenced 50 times
    python fence_writer.py HOME takeover  take the home over, count the
                                          records, wait for stdin to close
    python fence_writer.py HOME release   take the home, wait for a line on
                                          stdin (sent once another process took
                                          over), release the fence the way a
                                          stopping daemon does, then try one
                                          more fenced write: a stuck actor's

Each event is one JSON line on stdout. LMDB cannot open one environment twice
in a process, so each Fence of a test lives in a process of its own.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

from enact.fence import Fence, FencedError
from enact.home import STATE_DIR
from enact.storage import Storage

DATABASE = "test.records"
FENCED_WRITES = 50
DEADLINE_S = 30.0


def emit(**event: object) -> None:
    sys.stdout.write(orjson.dumps(event).decode() + "\n")
    sys.stdout.flush()


def main(home: Path, mode: str) -> int:
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    owner = fence.acquire(takeover=mode == "takeover")
    store = storage.grant("writer", [DATABASE])
    log = store.log(DATABASE)
    emit(event="acquired", generation=owner.generation, pid=owner.pid)
    if mode == "release":
        sys.stdin.readline()
        fence.release()
        try:
            store.write(lambda txn: log.append(txn, {"writer": owner.pid, "generation": owner.generation}))
        except FencedError as error:
            emit(event="after-release", landed=False, error=str(error))
        else:
            emit(event="after-release", landed=True, error="")
        storage.close()
        return 0
    if mode == "takeover":
        emit(event="count", records=store.read(log.count))
        sys.stdin.read()
        fence.release()
        storage.close()
        return 0

    written = fenced = late = 0
    deadline = time.monotonic() + DEADLINE_S
    while fenced < FENCED_WRITES and time.monotonic() < deadline:
        document = {"writer": owner.pid, "generation": owner.generation, "n": written + fenced}
        try:
            store.write(lambda txn, document=document: log.append(txn, document))
        except FencedError as error:
            if fenced == 0:
                emit(event="fenced", current=error.current)
            fenced += 1
        else:
            written += 1
            late += fenced > 0  # a write that landed after one was refused
            if written == 20:
                emit(event="writing")
        time.sleep(0.002)
    emit(event="done", written=written, fenced=fenced, late=late, is_current=fence.is_current())
    fence.release()
    storage.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
