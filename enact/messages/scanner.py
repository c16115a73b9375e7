"""The evidence scanner protocol (actor ``scanner``).

A scan reads the turns (feedback) or the tasks (experience) that are new
since its source's checkpoint, one batch at a time, asks an isolated model
call for observations, and stores them as signals. The curator links the
signals its candidates draw on and resolves them when a candidate is adopted.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from enact.evolution.signals import EvidenceSource, Signal, SignalState
from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import Refused

__all__ = [
    "History", "LinkSignals", "Refused", "Scan", "ScanHistory", "ScanOutcome", "ScanRecord", "ScanReport",
    "ScanSummary", "SetSignalState", "Signal", "SignalList", "Signals", "SignalsLinked", "SignalsUpdated",
]

ScanSource = Literal["feedback", "experience", ""]
ScanOutcome = Literal["completed", "failed", "nothing-new", "skipped"]

MAX_LIST = 1_000
SCAN_RUNNING = "a scan is running already; ask again once it has finished"
"""The reason of the refusal while one scan runs (code ``busy``: the CLI exits 1, not a usage error)."""
_ID = 64
_MAX_IDS = 100


@request("scanner.Scan")
@dataclass(frozen=True, slots=True, kw_only=True)
class Scan(Request["ScanReport | Refused"]):
    """Scan ``source`` ("" both): one batch each. Draining every pending
    batch is asking again while ``ScanSummary.pending`` says more is waiting
    (``enact evolve scan --force``), so no request outlasts its timeout by
    doing all of them. ``scheduled``: the evolve run asks; only a source with
    at least a full batch of new records is scanned, and nothing while a task
    runs (the caller has checked the evolve mode)."""

    source: ScanSource = ""
    scheduled: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanSummary:
    scan_id: str
    """"" when no scan was recorded (nothing new, or skipped)."""
    source: EvidenceSource
    outcome: ScanOutcome
    error: str
    """Why the scan failed or was skipped; "" otherwise."""
    records: int
    """Turns or tasks the scan sent to the model."""
    signals: tuple[str, ...]
    """Ids of the signals it found (new or already known)."""
    pending: int
    """Records of this source still waiting for a scan afterwards."""


@reply("scanner.ScanReport")
@dataclass(frozen=True, slots=True, kw_only=True)
class ScanReport:
    scans: tuple[ScanSummary, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanRecord:
    """One scan that called the model, as ``evolution.scans`` stores it."""

    id: str
    source: EvidenceSource
    outcome: Literal["completed", "failed"]
    error: str
    records: int
    refs: tuple[str, ...]
    """The turns and task markers it processed (sent, whatever it found)."""
    signals: tuple[str, ...]
    started_at: float
    finished_at: float


@request("scanner.Signals")
@dataclass(frozen=True, slots=True, kw_only=True)
class Signals(Request["SignalList | Refused"]):
    """Signals, newest first (``oldest_first``: the oldest first), in
    ``state`` ("" any); with ``ids``, only those (read by key, unknown ids
    skipped, ``limit`` not applied)."""

    state: str = field(default="", metadata=limit(16))
    ids: tuple[str, ...] = field(default=(), metadata=limit(_MAX_IDS))
    limit: int = 100  # after the fields using the codec's limit(), which it shadows
    oldest_first: bool = False


@reply("scanner.SignalList")
@dataclass(frozen=True, slots=True, kw_only=True)
class SignalList:
    signals: tuple[Signal, ...]
    more: int = 0
    """Signals of that state beyond this page (0 for a read by ids)."""


@internal("scanner.LinkSignals")
@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSignals(Request["SignalsLinked | Refused"]):
    """The curator committed ``candidate_id`` resting on these signals.
    Idempotent: a signal already linked to that candidate is reported
    linked again; an unknown id is skipped (not in ``linked``)."""

    signal_ids: tuple[str, ...] = field(metadata=limit(_MAX_IDS))
    candidate_id: str = field(metadata=limit(_ID))


@reply("scanner.SignalsLinked")
@dataclass(frozen=True, slots=True, kw_only=True)
class SignalsLinked:
    linked: tuple[str, ...]


@internal("scanner.SetSignalState")
@dataclass(frozen=True, slots=True, kw_only=True)
class SetSignalState(Request["SignalsUpdated | Refused"]):
    """Move signals to ``state`` (resolved once their candidate is adopted,
    dismissed when it is removed); unknown ids are skipped."""

    signal_ids: tuple[str, ...] = field(metadata=limit(_MAX_IDS))
    state: SignalState


@reply("scanner.SignalsUpdated")
@dataclass(frozen=True, slots=True, kw_only=True)
class SignalsUpdated:
    updated: tuple[str, ...]


@request("scanner.History")
@dataclass(frozen=True, slots=True, kw_only=True)
class History(Request["ScanHistory"]):
    """The recorded scans, newest first."""

    limit: int = 20


@reply("scanner.ScanHistory")
@dataclass(frozen=True, slots=True, kw_only=True)
class ScanHistory:
    scans: tuple[ScanRecord, ...]
