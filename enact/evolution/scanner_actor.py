"""The evidence scanner actor: a thin front over ``enact.evolution``.

It owns ``evolution.signals``, ``evolution.signal_order``, ``evolution.scans``
and ``evolution.checkpoints``. A scan's model calls run off the actor's thread
(``off_thread``: the curator must be able to read and link signals
meanwhile), and every write of a scan is made on it; one scan runs at a
time, and its reply is deferred until it has committed.
"""

from __future__ import annotations

import logging
from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.actors._batching import Deferred
from enact.config import RuntimeSettings
from enact.evolution.metrics import EvolutionMetrics
from enact.evolution.scan_store import DATABASES, ScanTables
from enact.evolution.scanning import Scanner
from enact.evolution.settings import EvolutionSettings
from enact.evolution.signals import EvidenceSource, SignalState
from enact.messages.common import RefusalCode, Refused
from enact.messages.inbox import ReadTurns, Turns
from enact.messages.scanner import (
    MAX_LIST,
    SCAN_RUNNING,
    History,
    LinkSignals,
    Scan,
    ScanHistory,
    ScanReport,
    SetSignalState,
    SignalList,
    Signals,
    SignalsLinked,
    SignalsUpdated,
)
from enact.messages.tasks import ChangedSince, ChangedTasks, Leases
from enact.runtime import Runtime

log = logging.getLogger(__name__)

__all__ = ["DATABASES", "ScannerActor"]

class _Reader:
    """The records, asked of the Inbox and the TaskQueue by cursor."""

    def __init__(self, context: ActorContext) -> None:
        self._context = context

    def turns(self, since: int, limit: int) -> Turns:
        return self._context.ask("inbox", ReadTurns(since=since, limit=limit))

    def last_turn(self, since: int) -> int:
        return self._context.ask("inbox", ReadTurns(since=since, last=1)).next_cursor

    def changed_tasks(self, after: int, limit: int) -> ChangedTasks:
        return self._context.ask("tasks", ChangedSince(after=after, limit=limit))

    def task_running(self) -> bool:
        return bool(self._context.ask("tasks", Leases()).leases)


class ScannerActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self.tables = ScanTables(context.own_store())
        self._scanner = Scanner(
            self.tables, _Reader(context), runtime.invoke, batch=context.config.typed(EvolutionSettings).scan_batch,
            timeout_s=context.config.typed(RuntimeSettings).timeout_s, off_thread=self.off_thread, counter=self,
            current=context.fence.is_current)
        self._scanning = False

    def on_start(self) -> None:
        if self.context.fence.is_current():
            self.tables.order_signals()
        self.signals_changed()

    def handle(self, message: Any) -> Any:
        match message:
            case Scan():
                return self._scan(message)
            case Signals():
                return self._signals(message)
            case LinkSignals():
                return self._link(message)
            case SetSignalState():
                return self._set_state(message)
            case History():
                return ScanHistory(scans=tuple(self.tables.history(max(0, min(message.limit, MAX_LIST)))))
        return super().handle(message)

    def _scan(self, message: Scan) -> Deferred | Refused:
        if not self.context.fence.is_current():
            return Refused(reason="this daemon was taken over (fenced); it scans nothing", code=RefusalCode.FENCED)
        if self._scanning:
            return Refused(reason=SCAN_RUNNING, code=RefusalCode.BUSY)
        self._scanning = True
        reply = Deferred()

        def done(report: ScanReport) -> None:
            self._scanning = False
            reply.resolve(report)

        def failed(error: Exception) -> None:  # a defect or an unavailable actor: the caller hears it
            log.error("evidence scan failed: %r", error, exc_info=error)
            self._scanning = False
            reply.fail(error)

        self._scanner.scan(message, done=done, failed=failed)
        return reply

    def counted(self, source: EvidenceSource, outcome: str) -> None:
        self.context.metrics.of(EvolutionMetrics).scans.labels(source=source.value, outcome=outcome).inc()

    def _signals(self, message: Signals) -> SignalList | Refused:
        state: SignalState | None = None
        if message.state:
            try:
                state = SignalState(message.state)
            except ValueError:
                return Refused(reason=f"unknown signal state {message.state!r}; one of "
                                       f"{', '.join(SignalState)}", code=RefusalCode.INVALID)
        if message.ids:
            return SignalList(signals=tuple(signal for signal in self.tables.signals_by_id(message.ids)
                                            if state is None or signal.state is state))
        page = self.tables.signals(state, max(0, min(message.limit, MAX_LIST)), oldest_first=message.oldest_first)
        return SignalList(signals=tuple(page), more=max(0, self.tables.count(state) - len(page)))

    def _link(self, message: LinkSignals) -> SignalsLinked | Refused:
        if not message.candidate_id:
            return Refused(reason="a link needs the candidate's id", code=RefusalCode.INVALID)
        linked = self.tables.link(message.signal_ids, message.candidate_id, self.context.clock.time())
        self.signals_changed()
        return SignalsLinked(linked=tuple(linked))

    def _set_state(self, message: SetSignalState) -> SignalsUpdated:
        updated = self.tables.set_state(message.signal_ids, message.state, self.context.clock.time())
        self.signals_changed()
        return SignalsUpdated(updated=tuple(updated))

    def signals_changed(self) -> None:
        gauge = self.context.metrics.of(EvolutionMetrics).signals
        for state, count in self.tables.counts().items():
            gauge.labels(state=state.value).set(count)
