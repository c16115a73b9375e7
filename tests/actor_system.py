"""The daemon's actors in this process, from the roster, on a manual clock.

For tests that would otherwise run a daemon only to wait for its clock (a
cron due time, a back-off): the same actors on a real home (LMDB, fence),
with time moved on by ``ManualClock.advance`` instead of waited for. A
stopped system leaves its home as a stopped daemon does; another may be
started on it with the same clock (time passing while no daemon runs)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from enact import config
from enact._app.commands import startup_context
from enact.actors.supervisor import Supervisor
from enact.channels.local import LocalChannel
from enact.chat.services import ChatServices
from enact.clock import ManualClock
from enact.commands import CommandContext, CommandRegistry, builtin_commands
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages._registry import Request
from enact.messages.common import HUMAN_CLI
from enact.metrics import Metrics
from enact.roster import actor_specs
from enact.runtime.scripted import ScriptedRuntime
from enact.storage import Storage

R = TypeVar("R")

NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}


class ActorSystem:
    def __init__(self, supervisor: Supervisor, clock: ManualClock, metrics: Metrics) -> None:
        self.supervisor = supervisor
        self.clock = clock
        self.metrics = metrics

    def ask(self, actor: str, message: Request[R]) -> R:
        return self.supervisor.ask(actor, message, timeout=30)


@contextmanager
def running_actors(home: Path, clock: ManualClock, environ: Mapping[str, str] = NO_WORKERS,
                   ) -> Iterator[ActorSystem]:
    """Every actor of the daemon on ``home`` (made if need be), its time
    ``clock``'s; the settings from ``home``'s config.toml and ``environ``.
    No workers by default: a task stays queued until the test ends it."""
    home.mkdir(parents=True, exist_ok=True)
    settings = config.load(home, environ=dict(environ))
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    commands = CommandRegistry()
    for command in builtin_commands(commands):
        commands.register(command)
    services = ChatServices(
        channels={"local": LocalChannel()}, runtime=ScriptedRuntime(home / "scripted.toml"), commands=commands,
        startup_context=startup_context(commands), origins={"local": HUMAN_CLI})
    fatal = threading.Event()
    metrics = Metrics()
    supervisor = Supervisor(actor_specs(services), home=home, config=settings, metrics=metrics, storage=storage,
                            fence=fence, on_fatal=lambda _: fatal.set(), clock=clock)
    commands.bind(CommandContext(fence=fence, status=lambda: "fine"))
    supervisor.start()
    try:
        yield ActorSystem(supervisor, clock, metrics)
    finally:
        supervisor.stop(5)
        fence.release()
        storage.close()
    assert not fatal.is_set()
