"""The accounting protocol: tokens spent per day and purpose (conversation,
task, scan, curation, probe), kept so that ``enact status`` can say what
today cost, across restarts."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import Done


@request("accounting.Spend", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Spend(Request["Done"]):
    """One runtime call spent this (told after each call)."""

    day: str = field(metadata=limit(10))
    """Local date, ``YYYY-MM-DD``."""
    purpose: str = field(metadata=limit(32))
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None


@request("accounting.SpentOn")
@dataclass(frozen=True, slots=True, kw_only=True)
class SpentOn(Request["Spending"]):
    day: str = field(metadata=limit(10))


@dataclass(frozen=True, slots=True, kw_only=True)
class PurposeSpending:
    purpose: str
    calls: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float | None = None


@reply("accounting.Spending")
@dataclass(frozen=True, slots=True, kw_only=True)
class Spending:
    day: str
    purposes: tuple[PurposeSpending, ...]


__all__ = ["Done", "PurposeSpending", "Spend", "Spending", "SpentOn"]
