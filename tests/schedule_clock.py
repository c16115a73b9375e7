"""What the schedule tests share, cron's and the evolve schedule's: a fast
scheduler clock and a home taken over by another process; and, for
the Scheduler's parts in-process, a real home (LMDB, fence) whose other
actors fail every ask (``home``, ``FaultyActors``, ``UnavailableActors``)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from enact import components, config
from enact.actors._asks import AskTimeout
from enact.actors._base import ActorContext
from enact.actors._specs import ActorSlot, ActorSpec
from enact.fence import Fence
from enact.metrics import Metrics
from enact.storage import Storage

from conftest import enact_env

FENCE_WRITER = Path(__file__).with_name("fence_writer.py")
FAST_TICK_S = 0.1
"""``scheduler.tick_s`` for tests that wait on due times."""
FAST_TICKS = {"ENACT_SCHEDULER_TICK_S": str(FAST_TICK_S)}


@contextlib.contextmanager
def taken_over(home: Path) -> Iterator[None]:
    """While this lasts, another process holds ``home``: it took it over, so
    the daemon (or actors) running there before are fenced."""
    newer = subprocess.Popen([sys.executable, str(FENCE_WRITER), str(home), "takeover"],
                             env=enact_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert newer.stdout is not None
        assert orjson.loads(newer.stdout.readline())["event"] == "acquired"
        yield
    finally:
        assert newer.stdin is not None
        newer.stdin.close()
        newer.wait(15)


class FaultyActors:
    """The other actors as the run sees them: every ask fails with an error
    that is not ActorUnavailable (a bug in an actor, a bad reply)."""

    stopping = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        self.asked.append(name)
        raise ValueError("the curator broke")

    def tell(self, name: str, message: object) -> None:
        pass


@contextlib.contextmanager
def home(tmp_path: Path, owner: str, databases: Sequence[str], actors: FaultyActors,
         schedule: str = "every 10s") -> Iterator[ActorContext]:
    (tmp_path / "config.toml").write_text(f'[evolve]\nschedule = "{schedule}"\n')
    settings = config.load(tmp_path, environ={}, settings=components.load().settings())
    storage = Storage(tmp_path / "state")
    fence = Fence(tmp_path, storage)
    fence.acquire(takeover=False)
    try:
        store = storage.grant(owner, databases)
        spec = ActorSpec(name=owner, actor=object)  # type: ignore[arg-type]
        yield ActorContext(name=owner, home=tmp_path, config=settings, metrics=Metrics(),
                           supervisor=actors, fence=fence, store=store,  # type: ignore[arg-type]
                           slot=ActorSlot(spec=spec, family=owner))
    finally:
        fence.release()
        storage.close()


class UnavailableActors(FaultyActors):
    """Every ask times out, as when the actor asked is restarting."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[object] = []

    def ask(self, name: str, message: Any, *, timeout: float) -> Any:
        self.asked.append(name)
        raise AskTimeout(name, message, timeout)

    def tell(self, name: str, message: object) -> None:
        self.told.append(message)
