"""An approved candidate as an ordinary task: what it asks and what it carries.

The task's idempotency key comes from the candidate id, so approving twice
(or again after a crash) finds the task already queued. The request asks
for a review and forbids merging: the owner lands it, or not.
"""

from __future__ import annotations

from collections.abc import Sequence

from enact.evolution.candidates import Candidate
from enact.evolution.signals import Signal
from enact.tasks.records import MAX_BRIEF

ORIGIN = "evolution"
REVIEW_ONLY = "Open a review; never merge."
_BRIEF_FIELD = 520
"""Characters kept of each field in the brief (five fields and the provenance fit MAX_BRIEF)."""
_BRIEF_FIELD_BESIDE_REFERENCE = 300
_REFERENCE = 1_200
"""A candidate with a reference (a parent's change) keeps less of each field, so the reference fits."""


KEY_PREFIX = "evolve:"


def task_key(candidate_id: str) -> str:
    return f"{KEY_PREFIX}{candidate_id}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def task_request(candidate: Candidate) -> str:
    return (f"Improve enact: {candidate.draft.title}\n\n{candidate.draft.proposed_change}\n\n"
            f"Test plan: {candidate.draft.test_plan}\n\n{REVIEW_ONLY}")


def task_brief(candidate: Candidate, signals: Sequence[Signal]) -> str:
    """The candidate's context: rationale, change, benefit, risk, test plan
    and provenance (its signals and their evidence refs)."""
    refs = sorted({ref for signal in signals for ref in signal.evidence_refs})
    draft = candidate.draft
    kept = _BRIEF_FIELD_BESIDE_REFERENCE if candidate.reference else _BRIEF_FIELD
    provenance = f"candidate {candidate.id} ({draft.source}); signals " + \
        (", ".join(draft.evidence_ids) or "none (brainstorm)") + ("; evidence " + ", ".join(refs) if refs else "")
    parts = [
        f"Rationale: {_clip(draft.rationale, kept)}",
        f"Change: {_clip(draft.proposed_change, kept)}",
        f"Benefit: {_clip(draft.expected_benefit, kept)}",
        f"Risk: {_clip(draft.risk, kept)}",
        f"Test plan: {_clip(draft.test_plan, kept)}",
    ]
    if candidate.reference:
        parts.append(f"Reference (the parent's change):\n{_clip(candidate.reference, _REFERENCE)}")
    body = "\n".join(parts)
    return _clip(f"{body}\nProvenance: {provenance}", MAX_BRIEF)

