"""What the daemon reports of itself: its status, the gauges scraped from it,
and the tokens its calls spent, tallied by the accounting actor."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from enact import __version__, config
from enact._app.channels import DaemonChannels
from enact.actors._asks import ActorUnavailable
from enact.actors.supervisor import Supervisor
from enact.budget.gate import BudgetGate
from enact.budget.ledger import Ledger
from enact.fence import Fence
from enact.messages.accounting import SpentOn
from enact.messages.budget import BudgetLine
from enact.messages.control import ConfigReport, SchemaVersion, SettingRow, StatusReport, StorageStatus
from enact.runtime import Usage
from enact.storage import Storage, StorageStats
from enact.tasks.settings import TasksSettings
from enact.tasks.task_branches import home_id

log = logging.getLogger("enact.daemon")


class DaemonReports:
    def __init__(self, *, home: Path, settings: config.Config, storage: Storage, fence: Fence,
                 supervisor: Supervisor, channels: DaemonChannels, budget: BudgetGate, metrics_addr: str,
                 started: float, revision: str) -> None:
        self.home = home
        self.home_text = str(home)
        self.budget = budget
        self.settings = settings
        self.storage = storage
        self.fence = fence
        self.supervisor = supervisor
        self.channels = channels
        self.metrics_addr = metrics_addr
        self.started = started
        self.revision = revision
        self.request_timeout_s = settings.typed(config.DaemonSettings).request_timeout_s
        self.runtime = settings.typed(config.RuntimeSettings).adapter
        self.pid = os.getpid()  # a system call each time, and status says it on every request
        # Made at the first claim when the home has none (a home made before
        # ids, or one no task ran in): status names the home by it.
        self.home_id = home_id(home)
        self._budget: tuple[Ledger, tuple[BudgetLine, ...], float] | None = None
        self._confinement: str | None = None  # what status says of the confinement
        self._schemas: tuple[dict[str, int], tuple[SchemaVersion, ...]] | None = None
        self._storage: tuple[StorageStats, tuple[SchemaVersion, ...], StorageStatus] | None = None

    def status(self, brief: bool = False) -> StatusReport:
        """The full report: each actor's record and the storage too (what
        ``enact status --verbose`` shows, and the shape an older release's
        updater reads); ``brief``, only what ``enact status`` shows."""
        spending = self.supervisor.ask("accounting", SpentOn(day=time.strftime("%Y-%m-%d")),
                                       timeout=self.request_timeout_s)
        actors, stopped, restarts, waiting = self.supervisor.summary()
        lines, resets_at = self._budget_lines()
        return StatusReport(
            version=__version__,
            revision=self.revision,
            pid=self.pid,
            home=self.home_text,
            home_id=self.home_id,
            generation=self.fence.generation,
            uptime_s=round(time.monotonic() - self.started, 3),
            metrics_addr=self.metrics_addr,
            actor_names=actors,
            stopped=stopped,
            restarts=restarts,
            waiting=waiting,
            spending=spending.purposes,
            channels=self.channels.states(),
            runtime=self.runtime,
            confinement=self._confinement_state(),
            budget=lines,
            budget_resets_at=resets_at,
            actors=() if brief else tuple(self.supervisor.statuses()),
            storage=None if brief else self._storage_status(),
        )

    def _budget_lines(self) -> tuple[tuple[BudgetLine, ...], float]:
        """Today's budget lines and when they reset, made again only when
        the budget actor published another ledger (it swaps in a new one on
        each change; a day that ended reads as a new one)."""
        ledger = self.budget.ledger()
        if self._budget is None or self._budget[0] is not ledger:
            self._budget = (ledger, ledger.lines(self.budget.settings.limits), ledger.period.end)
        return self._budget[1], self._budget[2]

    def _storage_status(self) -> StorageStatus:
        stats = self.storage.stats()
        versions = self.storage.schema_versions()
        if self._schemas is None or self._schemas[0] != versions:  # made once: 40-odd records per request
            self._schemas = (versions, tuple(SchemaVersion(database=name, version=version)
                                             for name, version in sorted(versions.items())))
        schemas = self._schemas[1]
        if self._storage is None or self._storage[0] != stats or self._storage[1] is not schemas:
            # Else the last one again: most requests find the same figures, and a record costs ~15k instructions.
            self._storage = (stats, schemas, StorageStatus(
                path=stats.path, map_bytes=stats.map_bytes, used_bytes=stats.used_bytes, databases=stats.databases,
                schemas=schemas,
            ))
        return self._storage[2]

    def config(self) -> ConfigReport:
        """The configuration this daemon runs with, as ``config show`` prints
        it: secrets only say whether they are set (``Config.describe``)."""
        return ConfigReport(pid=os.getpid(), settings=tuple(SettingRow(**row) for row in self.settings.describe()))

    def status_line(self) -> str:
        report = self.status(brief=True)
        return (
            f"enact {report.version}, pid {report.pid}, generation {report.generation}, up {report.uptime_s:.0f} s, "
            f"{len(report.actor_names) - len(report.stopped)} of {len(report.actor_names)} actors running"
        )

    def _confinement_state(self) -> str:
        """Tried once (bwrap runs ``true``): whether the kernel lets bwrap
        confine does not change while the daemon runs, nor does its setting."""
        if self._confinement is None:
            from enact.tasks.confine import state_of  # here, not run on every status: about 1 µs each time

            mode = self.settings.typed(TasksSettings).confinement
            self._confinement = state_of(mode)
        return self._confinement

    def scrape_gauges(self) -> Iterable[Metric]:
        mailbox = GaugeMetricFamily("enact_actor_mailbox_depth", "Messages waiting per actor", labels=["actor"])
        for family, value in sorted(self.supervisor.mailbox_depths().items()):
            mailbox.add_metric([family], value)
        stats = self.storage.stats()
        yield mailbox
        yield GaugeMetricFamily("enact_storage_map_bytes", "LMDB map size", value=stats.map_bytes)
        yield GaugeMetricFamily("enact_storage_used_bytes", "LMDB pages in use", value=stats.used_bytes)
        remaining = GaugeMetricFamily("enact_budget_remaining_tokens",
                                      "Tokens left of today's budget, per limited purpose and total",
                                      labels=["purpose"])
        for line in self.budget.lines():
            if line.remaining is not None:
                remaining.add_metric([line.purpose], line.remaining)
        yield remaining


def tally_spend(supervisor: Supervisor, purpose: str, usage: Usage) -> None:
    """Tell the accounting actor what a call spent, and the budget actor
    the tokens (input, cached or not, and output) its budgets count."""
    from enact.messages.accounting import Spend
    from enact.messages.budget import Spend as BudgetSpend

    try:
        supervisor.tell("accounting", Spend(
            day=time.strftime("%Y-%m-%d"), purpose=purpose, input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens, output_tokens=usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens, cost_usd=usage.cost_usd,
        ))
        tokens = usage.input_tokens + usage.output_tokens
        if tokens:
            supervisor.tell("budget", BudgetSpend(purpose=purpose, tokens=tokens))
    except ActorUnavailable:
        if not supervisor.stopping:
            raise
        # A call the stop cut short, answered after the accounting actor
        # went (a fenced daemon could not commit the tally anyway): the
        # metrics counted it; one line, not a traceback.
        log.warning("%s tokens of a %s call not tallied: the daemon is stopping",
                    usage.input_tokens + usage.output_tokens, purpose)
