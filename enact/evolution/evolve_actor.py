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
from dataclasses import dataclass
from typing import Any

from enact.actors._asks import ActorUnavailable
from enact.actors._base import ActorContext, EnactActor
from enact.evolution.runs import DATABASE, EvolveRuns
from enact.messages.evolve import ClockShown, GetClock
from enact.tasks.settings import TasksSettings

log = logging.getLogger(__name__)

DATABASES = (DATABASE,)


@dataclass(frozen=True, slots=True)
class Tick:
    """Told to itself every ``scheduler.tick_s``: is a run due?"""


class EvolveActor(EnactActor):
    def __init__(self, context: ActorContext) -> None:
        super().__init__(context)
        self._tick_s = context.config.typed(TasksSettings).scheduler_tick_s
        self._runs = EvolveRuns(context, context.own_store(), off_thread=self.off_thread)
        self._fenced_logged = False

    def on_start(self) -> None:
        # At once: a due time missed while the daemon was down runs now, once.
        # (Its own ref: the supervisor names it only once on_start is done.)
        self.actor_ref.tell(Tick())

    def on_stop(self) -> None:
        self.cancel_timers()
        super().on_stop()

    def handle(self, message: Any) -> Any:
        match message:
            case Tick():
                return self._tick()
            case GetClock():
                return self._clock_shown()
        return super().handle(message)

    def _tick(self) -> None:
        if not self.context.fence.is_current():
            if not self._fenced_logged:
                log.info("evolve: this daemon is fenced; it runs nothing")
                self._fenced_logged = True
            return  # and no next tick: a fenced daemon is stopping
        try:
            self._runs.tick()
        except ActorUnavailable as error:
            # Only a run given up tells (the curator, for its audit line); the
            # run is acknowledged before, so only that line is lost.
            log.warning("evolve: %s; a given-up run's audit line is lost", error)
        finally:
            if not self.context.supervisor.stopping:
                self.tell_later(self._tick_s, Tick())

    def _clock_shown(self) -> ClockShown:
        return self._runs.shown(self.context.clock.time())
