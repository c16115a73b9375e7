"""The daemon's actors in this process, as the components declare them, on a manual clock.

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

from enact import components
from enact._app.commands import daemon_commands
from enact._app.reports import tally_spend
from enact.actors.supervisor import Supervisor
from enact.budget.gate import BudgetGate
from enact.budget.settings import BudgetSettings
from enact.channels import Channel, InboxInlet
from enact.channels.local import LocalChannel
from enact.clock import ManualClock
from enact.commands import CommandContext
from enact.components import DaemonParts
from enact.config import Config, RuntimeSettings
from enact.fence import Fence
from enact.home import STATE_DIR
from enact.messages._registry import Request
from enact.messages.common import HUMAN_CLI
from enact.messages.inbox import Outcome
from enact.messages.local import Send
from enact.metrics import Metrics
from enact.runtime.metered import MeteredRuntime
from enact.storage import Storage

R = TypeVar("R")

NO_WORKERS = {"ENACT_DAEMON_WORKERS": "0"}


class ActorSystem:
    def __init__(self, supervisor: Supervisor, clock: ManualClock, channel: LocalChannel, *, metrics: Metrics,
                 budget: BudgetGate, settings: Config, storage: Storage, fence: Fence) -> None:
        self.supervisor = supervisor
        self.clock = clock
        self.channel = channel
        self.metrics = metrics
        """The daemon's metrics: runtime calls by outcome, tokens by purpose."""
        self.budget = budget
        self.settings = settings
        self.storage = storage
        self.fence = fence

    def ask(self, actor: str, message: Request[R]) -> R:
        return self.supervisor.ask(actor, message, timeout=30)

    def send(self, text: str, conversation: str = "cli") -> Outcome:
        """Say ``text`` in the local channel, as ``enact send`` does; its turn's outcome."""
        outcome = self.channel.send(Send(text=text, conversation=conversation, origin=HUMAN_CLI))
        assert isinstance(outcome, Outcome), outcome
        return outcome


@contextmanager
def running_actors(home: Path, clock: ManualClock, environ: Mapping[str, str] = NO_WORKERS,
                   chats: Mapping[str, str] | None = None) -> Iterator[ActorSystem]:
    """Every actor of the daemon on ``home`` (made if need be), its time
    ``clock``'s; the settings (the built-in components' too: the runtime is
    ``runtime.adapter``'s, the scripted one by default) from ``home``'s
    config.toml and ``environ``.
    No workers by default: a task stays queued until the test ends it."""
    home.mkdir(parents=True, exist_ok=True)
    installed = components.load()
    settings = installed.load_config(home, environ=environ)
    storage = Storage(home / STATE_DIR)
    fence = Fence(home, storage)
    fence.acquire(takeover=False)
    commands = daemon_commands(home, installed)
    channel = LocalChannel()
    # As the daemon makes them: the runtime metered, its calls tallied and held to the budget on ``clock``.
    budget = BudgetGate(settings.typed(BudgetSettings), clock)
    metrics = Metrics()
    metrics.initialise(adapters=(settings.typed(RuntimeSettings).adapter,))
    started: list[Supervisor] = []
    runtime = MeteredRuntime(installed.runtime(settings).make_runtime(settings, commands), metrics, budget=budget,
                             on_spent=lambda purpose, usage: tally_spend(started[0], purpose, usage))
    # ``chats``: more channels by name, with their origins, each delivering as the local one does
    # (a chat that is not the owner's CLI: an event is handed to the inbox with ``inbox.Receive``).
    channels: dict[str, Channel] = {"local": channel, **{name: LocalChannel() for name in chats or {}}}
    parts = DaemonParts(settings=settings, runtime=runtime, channels=channels,
                        origins={"local": HUMAN_CLI, **(chats or {})}, commands=commands, budget=budget)
    fatal = threading.Event()
    supervisor = Supervisor(components.component_actors(installed, parts), home=home, config=settings,
                            metrics=metrics, storage=storage, fence=fence, on_fatal=lambda _: fatal.set(),
                            clock=clock)
    started.append(supervisor)
    commands.bind(CommandContext(fence=fence, status=lambda: "fine",
                                 ask=lambda actor, message: supervisor.ask(actor, message, timeout=30)))
    supervisor.start()
    channel.start(InboxInlet("local", lambda actor, message: supervisor.ask(actor, message, timeout=30),
                             origin=HUMAN_CLI))
    try:
        yield ActorSystem(supervisor, clock, channel, metrics=metrics, budget=budget, settings=settings,
                          storage=storage, fence=fence)
    finally:
        channel.stop()
        supervisor.stop(5)
        fence.release()
        storage.close()
    assert not fatal.is_set()
