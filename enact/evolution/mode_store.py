"""The curator's part of the evolve modes: the stored mode, in
``evolution.settings`` (key ``mode``), and the runs the evolve actor gave up
(an audit event ``run-failed``, in the evolve history). The curator actor
calls these; the evolve actor runs the schedule and keeps its clock
(``enact.evolution.runs``).
"""

from __future__ import annotations

from collections.abc import Callable

import lmdb

from enact.evolution.curator_records import audit_event
from enact.evolution.modes import EvolveMode, parse_mode
from enact.evolution.settings import EvolutionSettings
from enact.messages.common import RefusalCode, Refused, is_human
from enact.messages.curator import AuditEvent, EvolveRunFailed, EvolveRunSkipped, ModeSet, ModeShown, SetMode
from enact.schedules import ScheduleError
from enact.storage import Store, Table

_MODE = b"mode"
_FORMER_CLOCK = b"clock"
"""A copy of the evolve actor's clock that homes kept here before it was
read from its owner; removed on start (``forget_former_clock``)."""


class EvolveModes:
    def __init__(self, store: Store, settings: Table, evolution: EvolutionSettings, *,
                 audit: Callable[[lmdb.Transaction, AuditEvent], None]) -> None:
        self._store = store
        self._settings = settings
        self._audit = audit
        self._default = evolution.mode

    def _stored_mode(self, txn: lmdb.Transaction) -> EvolveMode | None:
        document = self._settings.get(txn, _MODE)
        return EvolveMode(document["mode"]) if document else None

    def set_mode(self, message: SetMode, now: float) -> ModeSet | Refused:
        if not is_human(message.origin):
            who = message.origin or "an unnamed origin"
            return Refused(reason=f"the evolve mode is changed by a human only, not {who}",
                            code=RefusalCode.NOT_HUMAN)
        try:
            mode = parse_mode(message.mode)
        except ScheduleError as error:
            return Refused(reason=str(error), code=RefusalCode.INVALID)

        def write(txn: lmdb.Transaction) -> EvolveMode:
            previous = self._stored_mode(txn) or self._default
            self._settings.put(txn, _MODE, {"mode": mode.value, "origin": message.origin})
            self._audit(txn, audit_event("mode-set", at=now, detail=f"{previous.value} to {mode.value} by "
                                                                     f"{message.origin}"))
            return previous

        return ModeSet(mode=mode, previous=self._store.write(write))

    def mode(self) -> EvolveMode:
        return self._store.read(self._stored_mode) or self._default

    def shown(self) -> ModeShown:
        stored = self._store.read(self._stored_mode)
        return ModeShown(mode=stored or self._default, stored=stored is not None)

    def forget_former_clock(self) -> None:
        """Delete the clock copy an older version kept (a fenced daemon
        writes nothing; nobody reads the key, so leaving it is harmless)."""
        if self._store.read(lambda txn: self._settings.get(txn, _FORMER_CLOCK)) is not None:
            self._store.write(lambda txn: self._settings.delete(txn, _FORMER_CLOCK))

    def run_skipped(self, message: EvolveRunSkipped, now: float) -> None:
        event = audit_event("skipped-budget", at=now, detail=f"{message.run_id}: {message.reason}")
        self._store.write(lambda txn: self._audit(txn, event))

    def run_failed(self, message: EvolveRunFailed, now: float) -> None:
        event = audit_event("run-failed", at=now, detail=f"{message.run_id}: {message.reason}")
        self._store.write(lambda txn: self._audit(txn, event))
