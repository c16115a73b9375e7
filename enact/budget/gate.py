"""What a caller reads to know whether a purpose may spend now: the day's
ledger as the budget actor last published it, checked against the clock.

One gate per daemon, made with the metered runtime (which asks it before
every call) and handed to the actors that start background work (the
conversations, the scheduler, the evolve run). Only the budget actor writes
it (``publish``); a read is a dict lookup and a clock read, no ask, so the
chat path pays nothing measurable. A day that ended since the last publish
reads as a fresh one at once, whether or not the actor rolled it yet."""

from __future__ import annotations

from enact.budget.ledger import Ledger, Overrun, period_at
from enact.budget.settings import BudgetSettings
from enact.clock import Clock
from enact.messages.budget import BudgetLine


class BudgetGate:
    def __init__(self, settings: BudgetSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self._ledger = Ledger(period=period_at(clock.time(), settings.reset_minute))

    def publish(self, ledger: Ledger) -> None:
        """The budget actor's: its ledger after each change (one reference
        swapped, so a reader sees the old ledger or the new, never half)."""
        self._ledger = ledger

    def ledger(self) -> Ledger:
        """Today's ledger: the published one, or an empty one once its day ended."""
        ledger, now = self._ledger, self.clock.time()
        if now >= ledger.period.end or now < ledger.period.start:
            return Ledger(period=period_at(now, self.settings.reset_minute))
        return ledger

    def overrun(self, purpose: str) -> Overrun | None:
        """Why ``purpose`` may not spend now; None when it may."""
        limits = self.settings.limits
        if not limits:
            return None
        return self.ledger().overrun(limits, purpose)

    def lines(self) -> tuple[BudgetLine, ...]:
        return self.ledger().lines(self.settings.limits)

    def resets_at(self) -> float:
        return self.ledger().period.end


UNLIMITED = BudgetSettings(limits={}, reset_minute=0, conversation="notice", notify_to="")
"""A gate's settings where no budget applies (a runtime metered without a daemon)."""
