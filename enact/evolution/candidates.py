"""Improvement candidates: what the curator synthesises from evidence signals.

A candidate's id is derived from its draft (source, sorted evidence ids,
normalised title), so synthesising the same candidate again finds the one
already stored: that is how a crash between committing a candidate and
linking its signals is repaired on the next run.

A stored candidate holds its ``Draft`` (what the model proposed) beside
what the curator keeps about it (state, score, task, review); candidates
stored before that were flat, and ``lifted`` reads them.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from enact.frozen_dataclass import dataclass

MAX_FIELD = 1_200


class CandidateState(enum.StrEnum):
    ACTIVE = "active"
    APPROVED = "approved"
    ADOPTED = "adopted"
    REMOVED = "removed"
    REJECTED = "rejected"


LINEAGE = "lineage"
"""The source of a candidate offered by the lineage inbox (``curator.Offer``)."""


class RemovalClass(enum.StrEnum):
    DUPLICATE = "duplicate"
    SUPERSEDED = "superseded"
    OBSOLETE = "obsolete"
    ALREADY_RESOLVED = "already-resolved"
    NOT_ACTIONABLE = "not-actionable"


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """What the model proposed (synthesis or a brainstorm), validated."""

    source: str
    """``feedback`` or ``experience`` (one source per candidate), ``brainstorm``, or ``lineage`` (a
    parent's change: its evidence is the lineage entry)."""
    evidence_ids: tuple[str, ...]
    title: str
    rationale: str
    proposed_change: str
    expected_benefit: str
    risk: str
    test_plan: str

    @property
    def id(self) -> str:
        return candidate_id(self.source, self.evidence_ids, self.title)


CANDIDATE_FIELDS = tuple(field.name for field in fields(Draft) if field.name != "source")
"""Exactly the keys the model answers for a candidate (its source follows from its evidence)."""
_DRAFT_FIELDS = ("source", *CANDIDATE_FIELDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    id: str
    """Its draft's id."""
    draft: Draft
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
    reference: str = ""
    """What its task's brief carries besides the draft: a lineage candidate's parent change (commits,
    summary, a diff excerpt)."""


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


def lifted(document: dict[str, Any]) -> dict[str, Any]:
    """A stored candidate's document with its draft's fields under ``draft``:
    a candidate stored before it held its draft had them beside the rest."""
    if "draft" in document or not all(name in document for name in _DRAFT_FIELDS):
        return document
    rest = {name: value for name, value in document.items() if name not in _DRAFT_FIELDS}
    return {**rest, "draft": {name: document[name] for name in _DRAFT_FIELDS}}
