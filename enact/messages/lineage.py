"""The lineage protocol (actor ``lineage``): the parent agent's changes,
assessed one by one, in an inbox the owner reads and decides on.

An entry goes pending (assessed, stored) → linked (an improvement candidate
of source ``lineage`` carries it) → adopted (the candidate's review landed),
or ignored by the owner; or it is refused (its adaptation reaches into what
stays the owner's, ``enact.evolution.guard``: no candidate, the reason kept).
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Literal

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import NotFound, Origin, Refused

__all__ = ["Assessment", "ChangeAdopted", "Ignore", "LineageEntry", "LineageList", "LineageScanned", "LineageShown",
           "LineageState", "List", "NotFound", "Refused", "Reset", "ResetDone", "Scan", "Show"]

_ID = 64
_REASON = 1_000
ScanOutcome = Literal["assessed", "nothing-new", "not-configured", "started", "failed", "rewritten"]


class LineageState(enum.StrEnum):
    PENDING = "pending"
    LINKED = "linked"
    ADOPTED = "adopted"
    IGNORED = "ignored"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True, kw_only=True)
class Assessment:
    """What the model said of one parent change, checked."""

    summary: str
    behavioural_change: str
    rationale: str
    adaptation: str
    risks: str
    files: tuple[str, ...]
    tests: str
    confidence: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageEntry:
    id: str
    """``lin-`` and the first 12 digits of the change's commit."""
    commit: str
    merged: tuple[str, ...]
    """The commits a merge brought in; () for a plain commit."""
    messages: str
    diff_excerpt: str
    assessment: Assessment
    state: LineageState
    sequence: int
    """The order the changes were taken in (the parent's, oldest first)."""
    candidate_id: str = ""
    reason: str = ""
    """Why the owner ignored it, or why it was refused."""
    created_at: float
    updated_at: float


@request("lineage.Scan", long_wait="lineage.scan_timeout_s")
@dataclass(frozen=True, slots=True, kw_only=True)
class Scan(Request["LineageScanned | Refused"]):
    """Fetch the parent and assess its changes since the last assessed
    revision (at most ``lineage.max_commits``). ``scheduled``: the evolve
    run asks; a rewritten history already reported is not fetched again."""

    scheduled: bool = False


@reply("lineage.LineageScanned")
@dataclass(frozen=True, slots=True, kw_only=True)
class LineageScanned:
    outcome: ScanOutcome
    entries: tuple[str, ...] = ()
    """The entries this scan stored."""
    refused: tuple[str, ...] = ()
    """Those of ``entries`` whose adaptation the guard refused (no candidate; ``lineage show`` says why)."""
    remaining: int = 0
    """Parent changes left for the next scan."""
    revision: str = ""
    """The last assessed revision after the scan."""
    error: str = ""
    """Why the scan failed, or the rewritten history, in one line."""
    first_report: bool = True
    """False: this rewritten history was reported before."""


@request("lineage.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["LineageList | Refused"]):
    state: str = field(default="", metadata=limit(16))


@reply("lineage.LineageList")
@dataclass(frozen=True, slots=True, kw_only=True)
class LineageList:
    entries: tuple[LineageEntry, ...]
    revision: str = ""


@request("lineage.Show")
@dataclass(frozen=True, slots=True, kw_only=True)
class Show(Request["LineageShown | NotFound"]):
    entry_id: str = field(metadata=limit(_ID))


@reply("lineage.LineageShown")
@dataclass(frozen=True, slots=True, kw_only=True)
class LineageShown:
    entry: LineageEntry


@request("lineage.Ignore")
@dataclass(frozen=True, slots=True, kw_only=True)
class Ignore(Request["LineageShown | NotFound | Refused"]):
    """Human authority only; an adopted entry stays adopted."""

    entry_id: str = field(metadata=limit(_ID))
    reason: str = field(metadata=limit(_REASON))
    origin: Origin = ""


@request("lineage.Reset")
@dataclass(frozen=True, slots=True, kw_only=True)
class Reset(Request["ResetDone | Refused"]):
    """Go on from ``revision`` of the parent (after a rewritten history).
    Human authority only."""

    revision: str = field(metadata=limit(200))
    origin: Origin = ""


@reply("lineage.ResetDone")
@dataclass(frozen=True, slots=True, kw_only=True)
class ResetDone:
    revision: str


@internal("lineage.ChangeAdopted")
@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeAdopted:
    """The curator adopted a candidate of source ``lineage``."""

    candidate_id: str
    entry_ids: tuple[str, ...]
