"""What the daemon reports of itself: its status, the gauges scraped from it,
and the tokens its calls spent, tallied by the accounting actor."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import orjson
from prometheus_client.core import GaugeMetricFamily, Metric

from enact import __version__, config
from enact._app.channels import DaemonChannels
from enact.actors._asks import ActorUnavailable
from enact.actors.supervisor import Supervisor
from enact.budget.gate import BudgetGate
from enact.budget.ledger import Ledger
from enact.fence import Fence
from enact.messages import encode
from enact.messages.accounting import SpentOn
from enact.messages.budget import BudgetLine
from enact.messages.channel import ChannelState
from enact.messages.control import ConfigReport, SchemaVersion, SettingRow, StatusReport, StorageStatus
from enact.runtime import Usage
from enact.storage import Storage, StorageStats
from enact.tasks.settings import TasksSettings
from enact.tasks.task_branches import home_id

log = logging.getLogger("enact.daemon")

_UPTIME_KEY = b',"uptime_s":'


class _MadeStatus(NamedTuple):
    """A status report made, its uptime left at 0, and its encoding cut
    where the uptime goes: a request's frame is ``head``, the uptime
    (encoded as ``encode`` writes it) and ``tail``."""

    said: tuple[object, ...]
    """What the report says but the uptime, as gathered: compared with the next request's."""
    report: StatusReport
    head: bytes
    tail: bytes

    @classmethod
    def of(cls, said: tuple[object, ...], report: StatusReport) -> _MadeStatus:
        # Fields are written in their declared order, and a quote inside a
        # text is escaped, so the first `,"uptime_s":` is the field's.
        encoded = encode(report)
        head, key, rest = encoded.partition(_UPTIME_KEY + orjson.dumps(report.uptime_s) + b",")
        if not key:
            raise ValueError("the status report's encoding has no uptime where its field is")
        return cls(said, report, head + _UPTIME_KEY, b"," + rest)


class FramedStatus(NamedTuple):
    """A status frame, with the status made it encodes and the uptime put in."""

    made: _MadeStatus | None
    uptime_s: float
    frame: bytes


NOT_FRAMED = FramedStatus(None, 0.0, b"")


def framed_status(made: _MadeStatus, uptime_s: float, last: FramedStatus) -> FramedStatus:
    """The frame of ``made`` with ``uptime_s`` put in: ``last`` again when it
    is of this very status made (nothing it says changed since) and says
    the same uptime, to the millisecond (a poll's requests come dozens a
    millisecond)."""
    if last.made is made and last.uptime_s == uptime_s:
        return last
    return FramedStatus(made, uptime_s, made.head + orjson.dumps(uptime_s) + made.tail)


class AskedToday(NamedTuple):
    """Today's ``SpentOn``, and the local day it asks of: from its midnight to the next."""

    asked: SpentOn
    since: float
    until: float


def asked_today(now: float, kept: AskedToday) -> AskedToday:
    """The ``SpentOn`` of the local day ``now`` falls in: ``kept`` while it
    still does, so the idle read answers the same request again without
    reading, and the date is not formatted on every status request."""
    if kept.since <= now < kept.until:
        return kept
    day = time.localtime(now)
    since = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))
    until = time.mktime((day.tm_year, day.tm_mon, day.tm_mday + 1, 0, 0, 0, 0, 0, -1))  # mktime carries the day over
    return AskedToday(SpentOn(day=time.strftime("%Y-%m-%d", day)), since, until)


class _Quiet(NamedTuple):
    """A brief status made, with what it was made under: the same again
    while none of it moved."""

    activity: int
    """The actors' activity count, read before anything was gathered: the
    spending and the summary change only with it (the ledger too, but a
    day that ended also makes a new one, so it is checked itself)."""
    asked: AskedToday
    """The day the spending is of, whose bounds the clock is checked against."""
    ledger: Ledger
    channels: tuple[ChannelState, ...]
    generation: int
    made: _MadeStatus


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
        self._made: dict[bool, _MadeStatus | None] = {True: None, False: None}
        """The last status made, brief and full."""
        self._framed = {True: NOT_FRAMED, False: NOT_FRAMED}
        """The last frame of each, with its status made and its uptime."""
        self._spent_on = AskedToday(SpentOn(day=""), 0.0, 0.0)
        self._quiet: _Quiet | None = None
        """The last brief status made, and what it was made under."""

    def status(self, brief: bool = False) -> StatusReport:
        """The full report: each actor's record and the storage too (what
        ``enact status --verbose`` shows, and the shape an older release's
        updater reads); ``brief``, only what ``enact status`` shows."""
        return dataclasses.replace(self._status_made(brief).report, uptime_s=self._uptime_s())

    def status_frame(self, brief: bool = False) -> bytes:
        """``encode(self.status(brief))``, the reply frame the control
        socket writes: the last one encoded with this request's uptime put in
        (``_MadeStatus``); encoded again only when something it says changed,
        and the same frame again when nothing did and the uptime, to the
        millisecond it says, is the last frame's (dozens of requests a
        millisecond, when several clients poll)."""
        framed = framed_status(self._status_made(brief), self._uptime_s(), self._framed[brief])
        self._framed[brief] = framed  # one store: another thread reads it whole
        return framed.frame

    def _uptime_s(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def _status_made(self, brief: bool) -> _MadeStatus:
        """The report as of this request, but for its uptime. A brief one is
        the last one again while nothing it says can have moved: no actor
        did anything (``ActorActivity``: a message put, taken or handled, a
        thread ended, a slot changed), the day and the budget's ledger are
        the same, and so are the channels' states and the generation. Else
        what it says is gathered (``_gathered``)."""
        activity = self.supervisor.activity.count  # first: whatever happens from now on counts again
        now = time.time()
        ledger = self.budget.ledger()
        channels = self.channels.states()
        generation = self.fence.generation
        quiet = self._quiet
        if (brief and quiet is not None and quiet.activity == activity and quiet.asked.since <= now < quiet.asked.until
                and quiet.ledger is ledger and quiet.channels == channels and quiet.generation == generation):
            return quiet.made
        made = self._gathered(brief, now, ledger, channels, generation)
        if brief:
            self._quiet = _Quiet(activity, self._spent_on, ledger, channels, generation, made)  # one store
        return made

    def _gathered(self, brief: bool, now: float, ledger: Ledger, channels: tuple[ChannelState, ...],
                  generation: int) -> _MadeStatus:
        """The report as gathered now, made and encoded again only when what
        it says differs from the last one's: the record and its encoding
        were most of a status request's cost."""
        self._spent_on = asked_today(now, self._spent_on)
        spending = self.supervisor.ask("accounting", self._spent_on.asked, timeout=self.request_timeout_s).purposes
        summary = self.supervisor.summary()
        lines, resets_at = self._budget_lines(ledger)
        detail = None if brief else (tuple(self.supervisor.statuses()), self._storage_status())
        said = (spending, summary, lines, resets_at, channels, generation, detail)
        made = self._made[brief]
        if made is not None and made.said == said:
            return made
        actors, stopped, restarts, waiting = summary
        report = StatusReport(
            version=__version__,
            revision=self.revision,
            pid=self.pid,
            home=self.home_text,
            home_id=self.home_id,
            generation=generation,
            uptime_s=0.0,
            metrics_addr=self.metrics_addr,
            actor_names=actors,
            stopped=stopped,
            restarts=restarts,
            waiting=waiting,
            spending=spending,
            channels=channels,
            runtime=self.runtime,
            confinement=self._confinement_state(),
            budget=lines,
            budget_resets_at=resets_at,
            actors=() if detail is None else detail[0],
            storage=None if detail is None else detail[1],
        )
        made = self._made[brief] = _MadeStatus.of(said, report)  # one store: another thread reads it whole
        return made

    def _budget_lines(self, ledger: Ledger) -> tuple[tuple[BudgetLine, ...], float]:
        """The budget lines of ``ledger`` (today's) and when they reset, made
        again only when the budget actor published another ledger (it swaps
        in a new one on each change; a day that ended reads as a new one)."""
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
