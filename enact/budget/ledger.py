"""The budget's plain rules, time an argument: which budget day a moment
belongs to (it starts at ``budget.reset`` local time), what a day's ledger
holds, and whether a purpose may still spend."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import field, replace
from datetime import datetime, timedelta

from enact.budget.settings import TOTAL
from enact.frozen_dataclass import dataclass
from enact.messages.budget import BudgetLine


@dataclass(frozen=True, slots=True)
class Period:
    """One budget day: from a reset (``start``) to the next (``end``)."""

    day: str
    """The local date it starts on, ``YYYY-MM-DD``: the ledger's key."""
    start: float
    end: float


def period_at(now: float, reset_minute: int) -> Period:
    """The budget day ``now`` falls in, in the process's local time zone;
    a day across a daylight-saving change is an hour longer or shorter."""
    local = datetime.fromtimestamp(now)
    start = local.replace(hour=reset_minute // 60, minute=reset_minute % 60, second=0, microsecond=0)
    if start > local:
        start -= timedelta(days=1)
    end = start + timedelta(days=1)
    return Period(day=start.date().isoformat(), start=start.timestamp(), end=end.timestamp())


def clock_said(moment: float) -> str:
    return time.strftime("%H:%M", time.localtime(moment))


@dataclass(frozen=True, slots=True)
class Overrun:
    """Why a purpose may not spend now: the limit that is spent."""

    purpose: str
    """The purpose asked for."""
    spent: str
    """The budget that is spent: the purpose's own, or ``total``."""
    limit: int
    used: int
    resets_at: float

    def said(self) -> str:
        which = "total" if self.spent == TOTAL else f"{self.spent}"
        return (f"today's {which} token budget ({self.limit}) is spent ({self.used} used); "
                f"it starts again at {clock_said(self.resets_at)}")


@dataclass(frozen=True, slots=True)
class Ledger:
    """A budget day's use by purpose, and the budgets the owner was told are spent."""

    period: Period
    used: Mapping[str, int] = field(default_factory=dict)
    noticed: frozenset[str] = frozenset()

    @property
    def total(self) -> int:
        return sum(self.used.values())

    def spent(self, purpose: str, tokens: int) -> Ledger:
        return replace(self, used={**self.used, purpose: self.used.get(purpose, 0) + tokens})

    def noticed_of(self, name: str) -> Ledger:
        """The ledger once the owner was told that budget ``name`` is spent."""
        return replace(self, noticed=self.noticed | {name})

    def use_of(self, name: str) -> int:
        return self.total if name == TOTAL else self.used.get(name, 0)

    def overrun(self, limits: Mapping[str, int], purpose: str) -> Overrun | None:
        """The purpose's own budget if it is spent, else the total if it is; None: it may spend."""
        for name in (purpose, TOTAL):
            limit = limits.get(name, 0)
            used = self.use_of(name)
            if limit and used >= limit:
                return Overrun(purpose=purpose, spent=name, limit=limit, used=used, resets_at=self.period.end)
        return None

    def spent_budgets(self, limits: Mapping[str, int]) -> list[str]:
        """The budgets (purposes and ``total``) used up, the owner not yet told of."""
        return [name for name, limit in sorted(limits.items())
                if self.use_of(name) >= limit and name not in self.noticed]

    def lines(self, limits: Mapping[str, int]) -> tuple[BudgetLine, ...]:
        """Each purpose with a budget or with use, then the total."""
        names = sorted((set(limits) | set(self.used)) - {TOTAL})
        return tuple(BudgetLine(purpose=name, used=self.use_of(name), limit=limits.get(name, 0),
                                remaining=max(0, limits[name] - self.use_of(name)) if limits.get(name) else None)
                     for name in [*names, TOTAL])


def notice_text(overrun_of: str, limit: int, used: int, resets_at: float) -> str:
    """What the owner is told, once a budget day, when a budget is spent."""
    until = f"until the reset at {clock_said(resets_at)}"
    what = {
        TOTAL: f"no model is called {until}, except for the owner's CLI",
        "conversation": f"conversations other than the owner's CLI are not answered {until}",
        "task": f"tasks pause, and scheduled and backlog tasks do not start, {until}",
    }.get(overrun_of, f"work of purpose {overrun_of} does not start {until}")
    return (f"Today's {overrun_of} token budget ({limit}) is spent ({used} used): {what}. `enact status` shows "
            f"the budgets; budget.daily_tokens.{overrun_of} sets this one.")
