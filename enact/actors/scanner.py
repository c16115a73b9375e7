"""The evidence scanner actor: a thin front over ``enact.evolution``.

It owns ``evolution.signals``, ``evolution.scans`` and
``evolution.checkpoints``. A scan's model calls run on a thread of their own
(the curator must be able to read and link signals meanwhile); one scan runs
at a time, and its reply is deferred until it has committed.
"""

from __future__ import annotations

import time
from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.evolution.scan_store import DATABASES, ScanTables
from enact.evolution.signals import SignalState
from enact.messages.common import Rejected
from enact.messages.scanner import (
    MAX_LIST,
    History,
    LinkSignals,
    Scan,
    ScanHistory,
    SetSignalState,
    SignalList,
    Signals,
    SignalsLinked,
    SignalsUpdated,
)

__all__ = ["DATABASES", "ScannerActor"]

_LINKABLE_FROM = frozenset({SignalState.DISMISSED, SignalState.RESOLVED})
"""A link never revives a signal a person dismissed or a landed change resolved."""


class ScannerActor(EnactActor):
    def __init__(self, context: ActorContext, **options: Any) -> None:
        super().__init__(context)
        self.tables = ScanTables(context.own_store())
        self._options = options

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

    def _scan(self, message: Scan) -> Any:
        return Rejected(reason="scanning is not built yet")

    def _signals(self, message: Signals) -> SignalList | Rejected:
        state: SignalState | None = None
        if message.state:
            try:
                state = SignalState(message.state)
            except ValueError:
                return Rejected(reason=f"unknown signal state {message.state!r}; one of "
                                       f"{', '.join(SignalState)}")
        return SignalList(signals=tuple(self.tables.signals(state, max(0, min(message.limit, MAX_LIST)))))

    def _link(self, message: LinkSignals) -> SignalsLinked | Rejected:
        if not message.candidate_id:
            return Rejected(reason="a link needs the candidate's id")
        linked = self.tables.update_signals(
            message.signal_ids, {"state": SignalState.LINKED, "candidate_id": message.candidate_id}, time.time(),
            unless_state=_LINKABLE_FROM)
        self._export_counts()
        return SignalsLinked(linked=tuple(linked))

    def _set_state(self, message: SetSignalState) -> SignalsUpdated:
        updated = self.tables.update_signals(message.signal_ids, {"state": message.state}, time.time())
        self._export_counts()
        return SignalsUpdated(updated=tuple(updated))

    def _export_counts(self) -> None:
        gauge = self.context.metrics.evolution_signals
        for state, count in self.tables.counts().items():
            gauge.labels(state=state.value).set(count)
