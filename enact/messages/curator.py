"""The curator protocol (actor ``curator``): improvement candidates,
proposals, removal and approval into a task.

``Propose`` synthesises candidates from the scanner's active signals and
asks a model which one to recommend; only a human approves (a task that
ends in a review) or removes a candidate. Every change is in the audit
history (``History``).
"""

from __future__ import annotations

import enum
from dataclasses import field

from enact.evolution.candidates import Candidate, Draft, RemovalClass
from enact.evolution.modes import EvolveMode
from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import NotFound, Origin, Refused

MAX_LIST = 1_000
PROPOSAL_RUNNING = "a proposal is being made now; propose again once it is done"
"""The reason of the refusal while one proposal is made (code ``busy``: the CLI exits 1, not a usage error)."""
_ID = 64
_REASON = 2_000


class ProposalState(enum.StrEnum):
    OPEN = "open"
    SUPERSEDED = "superseded"
    APPROVED = "approved"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovalSuggestion:
    """The curator's model suggests removing a candidate; only a human
    removes it (``Remove`` with ``suggestion_id``)."""

    id: str
    candidate_id: str
    removal_class: RemovalClass
    reason: str
    refs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    id: str
    candidate_id: str | None
    """The recommended candidate; None when none is worth doing now."""
    reason: str
    guidance: str
    """Scope, risk and test guidance for whoever does the work."""
    fallback: bool
    """True: curation failed (the reason says why) and the top-ranked safe
    candidate was taken instead."""
    removal_suggestions: tuple[RemovalSuggestion, ...]
    state: ProposalState
    created_at: float
    candidates: tuple[str, ...] = ()
    """The candidates shown to curation, best ranked first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent:
    at: float
    kind: str
    """synthesised, synthesis-rejected, proposed, superseded, approved,
    removed, review-recorded, adopted, linked, run-failed, skipped-budget,
    mode-set (its detail: from, to and by whom)."""
    candidate_id: str = ""
    proposal_id: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalView:
    """A candidate's evidence signal as the scanner holds it."""

    id: str
    source: str
    observation: str
    confidence: float
    explicit: bool
    evidence_refs: tuple[str, ...]
    state: str


@request("curator.Propose")
@dataclass(frozen=True, slots=True, kw_only=True)
class Propose(Request["Proposed | Refused"]):
    """Synthesise candidates from active unlinked signals, then curate: the
    new proposal closes an earlier open one as superseded."""

    origin: Origin = ""


@reply("curator.Proposed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Proposed:
    proposal: Proposal
    synthesised: tuple[str, ...] = ()
    """Candidates this run synthesised (or found again after a crash)."""
    synthesis_note: str = ""
    """Why synthesis made nothing (no signals, a rejected batch, a model failure)."""


@request("curator.Candidates")
@dataclass(frozen=True, slots=True, kw_only=True)
class Candidates(Request["CandidateList | Refused"]):
    """Candidates best ranked first; ``state`` "" for every state."""

    state: str = field(default="", metadata=limit(16))
    limit: int = 100


@reply("curator.CandidateList")
@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateList:
    candidates: tuple[Candidate, ...]


@request("curator.Show")
@dataclass(frozen=True, slots=True, kw_only=True)
class Show(Request["CandidateShown | NotFound"]):
    candidate_id: str = field(metadata=limit(_ID))


@reply("curator.CandidateShown")
@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateShown:
    candidate: Candidate
    signals: tuple[SignalView, ...]
    audit: tuple[AuditEvent, ...]
    signals_note: str = ""
    """Why the signals are missing (the scanner did not answer), else ""."""


@request("curator.Approve")
@dataclass(frozen=True, slots=True, kw_only=True)
class Approve(Request["Approved | NotFound | Refused"]):
    """Queue the candidate as an ordinary task that ends in a review.
    Human authority only."""

    candidate_id: str = field(metadata=limit(_ID))
    repo: str = field(default="", metadata=limit(4096))
    """The repository the task works on; "" for the git checkout the daemon
    runs enact from (else ``tasks.default_repo``)."""
    origin: Origin = ""


@reply("curator.Approved")
@dataclass(frozen=True, slots=True, kw_only=True)
class Approved:
    candidate_id: str
    task_id: int | None
    """None: approving it made no task (a skill candidate installs its skill)."""
    existing: bool
    """The candidate was approved before: this is its task."""
    installed: str = ""
    """The skill a skill candidate's approval installed."""
    removed: str = ""
    """The skill a removal candidate's approval removed."""


@internal("curator.Offer")
@dataclass(frozen=True, slots=True, kw_only=True)
class Offer(Request["Offered | Refused"]):
    """Keep an assessed candidate another component made (a learned skill, a
    parent's change from the lineage inbox) active; the owner decides on it
    as on any other. The same draft offered again finds the one stored."""

    draft: Draft
    reference: str = field(default="", metadata=limit(4_000))
    """What the approved task's brief carries as reference (a parent's change)."""
    score: float = 0.0
    origin: Origin = ""


@reply("curator.Offered")
@dataclass(frozen=True, slots=True, kw_only=True)
class Offered:
    candidate_id: str
    existing: bool
    """The same candidate was kept before."""


@request("curator.Remove")
@dataclass(frozen=True, slots=True, kw_only=True)
class Remove(Request["Removed | NotFound | Refused"]):
    """Mark a candidate removed (its record stays). With ``suggestion_id``
    the stored suggestion must name this candidate. Human authority only."""

    candidate_id: str = field(metadata=limit(_ID))
    reason: str = field(metadata=limit(_REASON))
    suggestion_id: str = field(default="", metadata=limit(_ID))
    removal_class: str = field(default="", metadata=limit(32))
    """With ``suggestion_id``: the class the owner read; it must be the suggestion's."""
    origin: Origin = ""


@reply("curator.Removed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Removed:
    candidate: Candidate


@request("curator.History")
@dataclass(frozen=True, slots=True, kw_only=True)
class History(Request["EvolveHistory | Refused"]):
    """The audit events, newest first."""

    limit: int = 100


@reply("curator.EvolveHistory")
@dataclass(frozen=True, slots=True, kw_only=True)
class EvolveHistory:
    events: tuple[AuditEvent, ...]
    proposals: tuple[Proposal, ...] = ()
    """The newest proposals, newest first."""


# -- modes and the schedule (evo-modes adds its requests below) ------------


@request("curator.SetMode")
@dataclass(frozen=True, slots=True, kw_only=True)
class SetMode(Request["ModeSet | Refused"]):
    """Store the evolve mode (disabled, co-evolve, auto-evolve); from then on
    it wins over ``evolve.mode``. Human authority only."""

    mode: str = field(metadata=limit(32))
    origin: Origin = ""


@reply("curator.ModeSet")
@dataclass(frozen=True, slots=True, kw_only=True)
class ModeSet:
    mode: EvolveMode
    previous: EvolveMode


@request("curator.GetMode")
@dataclass(frozen=True, slots=True, kw_only=True)
class GetMode(Request["ModeShown"]):
    """The evolve mode in force (the schedule's clock is the evolve actor's:
    ``evolve.GetClock``)."""


@reply("curator.ModeShown")
@dataclass(frozen=True, slots=True, kw_only=True)
class ModeShown:
    mode: EvolveMode
    stored: bool
    """Set by ``SetMode``; False: ``evolve.mode`` decides."""


@internal("curator.EvolveRunFailed")
@dataclass(frozen=True, slots=True, kw_only=True)
class EvolveRunFailed:
    """The evolve actor gave up a scheduled evolve run whose attempts kept
    failing (told, for the evolve history's audit)."""

    run_id: str
    due: float
    reason: str


@internal("curator.EvolveRunSkipped")
@dataclass(frozen=True, slots=True, kw_only=True)
class EvolveRunSkipped:
    """A scheduled evolve run left steps out because their purposes' budgets
    were spent (told, for the evolve history's audit)."""

    run_id: str
    due: float
    reason: str


@request("curator.Brainstorm")
@dataclass(frozen=True, slots=True, kw_only=True)
class Brainstorm(Request["Brainstormed | Refused"]):
    """Brainstorm up to 3 candidates from ``theme`` (auto-evolve), at most
    once per 24 hours per theme, none repeating an existing candidate."""

    theme: str = field(metadata=limit(_REASON))
    origin: Origin = ""


@reply("curator.Brainstormed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Brainstormed:
    candidates: tuple[str, ...]
    """The ids of the candidates stored (new ideas only)."""
    skipped: bool = False
    """The theme was brainstormed within 24 hours: no model was called."""
    note: str = ""
    """Why nothing was stored (an invalid reply, a model failure, all repeats)."""
