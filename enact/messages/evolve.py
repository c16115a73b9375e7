"""The evolve protocol (actor ``evolve``): the clock of the scheduled
evolve run, read from the one actor that keeps it. What a run may do (the
mode) is the curator's (``curator.GetMode``); whoever shows both asks both.
"""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request


@request("evolve.GetClock")
@dataclass(frozen=True, slots=True, kw_only=True)
class GetClock(Request["ClockShown"]):
    """The schedule's state: when the next run is due, and the last run."""


@reply("evolve.ClockShown")
@dataclass(frozen=True, slots=True, kw_only=True)
class ClockShown:
    schedule: str
    next_due_at: float | None
    """None until the evolve actor has looked at the schedule once."""
    last_run_at: float | None
    last_outcome: str = ""
