"""The budget protocol: what each runtime call spent, told to the budget
actor, which keeps the day's ledger (``enact.budget``); and the lines of use
against budget that ``enact status`` shows."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, request
from enact.messages.common import Done


@request("budget.Spend", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Spend(Request["Done"]):
    """One runtime call of ``purpose`` spent ``tokens`` (input and output), told after each call."""

    purpose: str = field(metadata=limit(32))
    tokens: int


@internal("budget.Roll")
@dataclass(frozen=True, slots=True, kw_only=True)
class Roll:
    """The budget actor's own timer: look whether the day started again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetLine:
    """A purpose's (or ``total``'s) use today against its budget."""

    purpose: str
    used: int
    limit: int
    """0: unlimited."""
    remaining: int | None
    """None: unlimited."""


__all__ = ["BudgetLine", "Done", "Roll", "Spend"]
