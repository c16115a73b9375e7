"""Improvement candidates: what the curator synthesises from evidence signals.

A candidate's id is derived from its content (source, sorted evidence ids,
normalised title), so synthesising the same candidate again finds the one
already stored: that is how a crash between committing a candidate and
linking its signals is repaired on the next run.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

CANDIDATE_FIELDS = ("evidence_ids", "title", "rationale", "proposed_change", "expected_benefit", "risk",
                    "test_plan")
"""Exactly the keys a synthesised candidate has."""
MAX_FIELD = 1_200


class CandidateState(enum.StrEnum):
    ACTIVE = "active"
    APPROVED = "approved"
    ADOPTED = "adopted"
    REMOVED = "removed"
    REJECTED = "rejected"


class RemovalClass(enum.StrEnum):
    DUPLICATE = "duplicate"
    SUPERSEDED = "superseded"
    OBSOLETE = "obsolete"
    ALREADY_RESOLVED = "already-resolved"
    NOT_ACTIONABLE = "not-actionable"


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    id: str
    source: str
    """``feedback`` or ``experience`` (one source per candidate)."""
    evidence_ids: tuple[str, ...]
    title: str
    rationale: str
    proposed_change: str
    expected_benefit: str
    risk: str
    test_plan: str
    state: CandidateState
    brainstorm: bool = False
    theme: str = ""
    task_id: int | None = None
    review_id: str = ""
    score: float = 0.0
    """The score when the candidate was made; ``ranking.rescored`` ages it."""
    created_at: float
    updated_at: float
    evidence_at: float = 0.0
    """When its newest signal was made (0: no evidence, or stored before this was kept)."""


_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    """Casefolded, whitespace collapsed, trailing punctuation stripped."""
    return _SPACE.sub(" ", text.casefold()).strip().rstrip(".!?;:,").strip()


def candidate_id(source: str, evidence_ids: Iterable[str], title: str) -> str:
    digest = hashlib.sha256()
    for part in (source, *sorted(evidence_ids), normalised(title)):
        digest.update(part.encode())
        digest.update(b"\0")
    return "cand-" + digest.hexdigest()[:12]

