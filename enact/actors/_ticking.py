"""An actor that looks at its clock on a tick: the scheduler's cron and
backlog, the evolve schedule."""

from __future__ import annotations

import logging
from typing import ClassVar

from enact.actors._base import ActorContext, EnactActor


class TickingActor(EnactActor):
    """Ticks once at start (a due time missed while the daemon was down is
    due now, once), then again ``every_s`` after each tick ends, until the
    daemon stops. A fenced daemon's actor stops ticking, which it logs once.
    A subclass passes its tick message, calls ``ticked()`` when it handles
    it, and does its work in ``tick()``."""

    fenced_note: ClassVar[str] = "it does nothing more"
    """What a fenced daemon's actor no longer does, for the log."""

    def __init__(self, context: ActorContext, *, every_s: float, tick: object) -> None:
        super().__init__(context)
        self._every_s = every_s
        self._tick = tick
        self._fenced_logged = False

    def on_start(self) -> None:
        # Its own ref: the supervisor names it only once on_start is done.
        self.actor_ref.tell(self._tick)

    def on_stop(self) -> None:
        self.cancel_timers()
        super().on_stop()

    def ticked(self) -> None:
        if not self.context.fence.is_current():
            if not self._fenced_logged:
                # Under the actor's own module, beside the rest of what it logs.
                logging.getLogger(type(self).__module__).info(
                    "%s: this daemon is fenced; %s", self.context.name, self.fenced_note)
                self._fenced_logged = True
            return  # and no next tick: a fenced daemon is stopping
        try:
            self.tick()
        finally:
            if not self.context.supervisor.stopping:
                self.tell_later(self._every_s, self._tick)

    def tick(self) -> None:
        raise NotImplementedError
