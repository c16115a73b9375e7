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
from enact.evolution.candidates import Candidate
from enact.messages.curator import AuditEvent, Proposal
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

    def handle(self, message: Any) -> Any:
        return super().handle(message)


__all__ = ["DATABASES", "CuratorActor"]
