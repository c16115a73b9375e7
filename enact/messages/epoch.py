"""The epoch protocol: is this daemon still the one that owns the home?"""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request


@request("epoch.RequireCurrent", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class RequireCurrent(Request["Current | Fenced"]):
    """Asked before an effect; answered ``Current`` or ``Fenced``."""


@reply("epoch.Current")
@dataclass(frozen=True, slots=True, kw_only=True)
class Current:
    generation: int


@reply("epoch.Fenced")
@dataclass(frozen=True, slots=True, kw_only=True)
class Fenced:
    """Another daemon took the home over; this one must not act."""

    generation: int
    current_generation: int


@request("epoch.Describe")
@dataclass(frozen=True, slots=True, kw_only=True)
class Describe(Request["Owner"]):
    """Who owns the home now."""


@reply("epoch.Owner")
@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    generation: int
    pid: int
    host: str
    started_at: float
    metrics_addr: str = ""
    """The metrics address it serves ("" in records written before it was kept)."""
