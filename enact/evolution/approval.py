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
    provenance = f"candidate {candidate.id} ({draft.source}); signals " + \
        (", ".join(draft.evidence_ids) or "none (brainstorm)") + ("; evidence " + ", ".join(refs) if refs else "")
    parts = [
        f"Rationale: {_clip(draft.rationale, _BRIEF_FIELD)}",
        f"Change: {_clip(draft.proposed_change, _BRIEF_FIELD)}",
        f"Benefit: {_clip(draft.expected_benefit, _BRIEF_FIELD)}",
        f"Risk: {_clip(draft.risk, _BRIEF_FIELD)}",
        f"Test plan: {_clip(draft.test_plan, _BRIEF_FIELD)}",
    ]
    body = "\n".join(parts)
    return _clip(f"{body}\nProvenance: {provenance}", MAX_BRIEF)

