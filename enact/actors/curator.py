"""The Curator: improvement candidates from evidence, proposals, and a
human's approval into an ordinary task.

Owns ``evolution.candidates`` (key: the candidate id), ``evolution.proposals``
and ``evolution.audit`` (append logs) and ``evolution.settings`` (the evolve
mode and schedule state, written by ``enact.actors._evolve_schedule``). The
rules are plain modules in ``enact.evolution``; this actor stores, asks the
scanner, the task queue and the reviews, and runs its model calls on a
thread of its own so that it stays responsive while a model thinks.
"""

from __future__ import annotations

import logging
from typing import Any

from enact.actors._base import ActorContext, EnactActor
from enact.actors._evolve_brainstorm import brainstorm
from enact.actors._evolve_schedule import EvolveModes
from enact.evolution.candidates import Candidate
from enact.messages.curator import AuditEvent, Brainstorm, EvolveClockChanged, GetMode, Proposal, SetMode
from enact.runtime import Runtime
from enact.storage import RecordTable

log = logging.getLogger(__name__)

CANDIDATES = "evolution.candidates"
PROPOSALS = "evolution.proposals"
AUDIT = "evolution.audit"
SETTINGS = "evolution.settings"
DATABASES = (CANDIDATES, PROPOSALS, AUDIT, SETTINGS)


class CuratorActor(EnactActor):
    def __init__(self, context: ActorContext, *, runtime: Runtime) -> None:
        super().__init__(context)
        self._store = context.own_store()
        self._candidates = RecordTable(self._store.table(CANDIDATES), Candidate)
        self._proposals = RecordTable(self._store.log(PROPOSALS), Proposal)
        self._audit = RecordTable(self._store.log(AUDIT), AuditEvent)
        self._settings = self._store.table(SETTINGS)
        self._runtime = runtime
        self._modes = EvolveModes(self._store, self._settings, context.config)

    def handle(self, message: Any) -> Any:
        match message:
            # Evolve modes and brainstorming (enact.actors._evolve_schedule, _evolve_brainstorm).
            case SetMode():
                return self._modes.set_mode(message)
            case GetMode():
                return self._modes.shown()
            case EvolveClockChanged():
                return self._modes.clock_changed(message)
            case Brainstorm():
                return brainstorm(message, store=self._store, settings=self._settings, candidates=self._candidates,
                                  runtime=self._runtime, ask=self.context.ask,
                                  timeout_s=float(self.context.config["runtime.timeout_s"]))
        return super().handle(message)


__all__ = ["DATABASES", "CuratorActor"]
