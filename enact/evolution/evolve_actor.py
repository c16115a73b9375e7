"""The evolve actor: the clock of the scheduled evolve run.

Owns ``scheduler.evolve`` (the run's claimed clock; the name predates this
actor, when the Scheduler carried the run). Every ``scheduler.tick_s`` it
looks whether a run is due (``enact.evolution.runs``), and a due run goes on
as a chain of messages: each ask waits off its thread, so the actor never
waits for a model. A fenced daemon runs nothing and stops ticking.
``evolve.GetClock`` is answered from the store on the actor's thread: a read,
so it never waits for a run.
"""

from __future__ import annotations

import logging
from typing import Any

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext
from enact.actors._ticking import TickingActor
from enact.budget.gate import BudgetGate
from enact.evolution.runs import DATABASE, EvolveRuns
from enact.frozen_dataclass import dataclass
from enact.messages.evolve import ClockShown, GetClock
from enact.tasks.settings import TasksSettings

log = logging.getLogger(__name__)

DATABASES = (DATABASE,)


@dataclass(frozen=True, slots=True)
class Tick:
    """Told to itself every ``scheduler.tick_s``: is a run due?"""


class EvolveActor(TickingActor):
    fenced_note = "it runs nothing"

    def __init__(self, context: ActorContext, *, budget: BudgetGate | None = None) -> None:
        super().__init__(context, every_s=context.config.typed(TasksSettings).scheduler_tick_s, tick=Tick())
        self._runs = EvolveRuns(context, context.own_store(), off_thread=self.off_thread, budget=budget)

    def handle(self, message: Any) -> Any:
        match message:
            case Tick():
                return self.ticked()
            case GetClock():
                return self._clock_shown()
        return super().handle(message)

    def tick(self) -> None:
        try:
            self._runs.tick()
        except ActorUnavailable as error:
            # Only a run given up tells (the curator, for its audit line); the
            # run is acknowledged before, so only that line is lost.
            log.warning("evolve: %s; a given-up run's audit line is lost", error)

    def _clock_shown(self) -> ClockShown:
        return self._runs.shown(self.context.clock.time())
