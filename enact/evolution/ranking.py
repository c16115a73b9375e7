"""The deterministic ranking of candidates, and source diversity in what is shown.

A candidate's score weighs how much evidence it rests on, how confident and
how explicit that evidence was, how recent it is (aged at rank time by
``rescored``), and its source (the owner's own feedback a little above what the
agent inferred from its tasks). Brainstormed candidates rest on no evidence
and rank below every evidenced one of equal merit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

from enact.evolution.candidates import Candidate
from enact.evolution.signals import Signal

WEIGHTS = {"evidence": 0.30, "confidence": 0.30, "explicit": 0.15, "recency": 0.15, "source": 0.10}
SOURCE_WEIGHT = {"feedback": 1.0, "experience": 0.7}
EVIDENCE_SATURATES_AT = 5
"""More signals than this add nothing: one complaint repeated is not ten."""
RECENCY_HALF_LIFE_S = 7 * 24 * 3600.0

C = TypeVar("C", bound=Candidate)


def score(source: str, evidence: Sequence[Signal], now: float) -> float:
    """In [0, 1], rounded so that equal inputs give equal scores on any machine."""
    if not evidence:
        return round(WEIGHTS["source"] * SOURCE_WEIGHT.get(source, 0.0) * 0.5, 6)
    count = min(len(evidence), EVIDENCE_SATURATES_AT) / EVIDENCE_SATURATES_AT
    confidence = sum(min(max(signal.confidence, 0.0), 1.0) for signal in evidence) / len(evidence)
    explicit = sum(1 for signal in evidence if signal.explicit) / len(evidence)
    recency = _recency(max(signal.created_at for signal in evidence), now)
    total = (WEIGHTS["evidence"] * count + WEIGHTS["confidence"] * confidence + WEIGHTS["explicit"] * explicit
             + WEIGHTS["recency"] * recency + WEIGHTS["source"] * SOURCE_WEIGHT.get(source, 0.0))
    return round(total, 6)


def _recency(evidence_at: float, now: float) -> float:
    return math.pow(0.5, max(0.0, now - evidence_at) / RECENCY_HALF_LIFE_S)


def score_at(candidate: Candidate, now: float) -> float:
    """The candidate's score at ``now``: its stored score with the recency
    it had when made replaced by the recency its evidence has now."""
    if candidate.evidence_at <= 0:
        return candidate.score
    then = _recency(candidate.evidence_at, candidate.created_at)
    return round(candidate.score + WEIGHTS["recency"] * (_recency(candidate.evidence_at, now) - then), 6)


def rescored(candidates: Iterable[C], now: float) -> list[C]:
    """Copies scored at ``now``, to rank and show (never stored: the stored
    score stays the one made at creation, which ``score_at`` starts from)."""
    return [dataclasses.replace(c, score=score_at(c, now)) for c in candidates]


def ranked(candidates: Iterable[C]) -> list[C]:
    """Best first; ties go to the newer candidate, then to the id, so the
    order never depends on how they were stored."""
    return sorted(candidates, key=lambda c: (-c.score, -c.created_at, c.id))


def diverse(candidates: Iterable[C], limit: int) -> list[C]:
    """The best ``limit`` in rank order, holding a place for the best of
    each source, so that one busy source cannot hide the other."""
    order = ranked(candidates)
    if limit <= 0:
        return []
    chosen: list[C] = []
    seen_sources: set[str] = set()
    for candidate in order:
        if candidate.draft.source not in seen_sources:
            seen_sources.add(candidate.draft.source)
            chosen.append(candidate)
    chosen = chosen[:limit]
    taken = {candidate.id for candidate in chosen}
    for candidate in order:
        if len(chosen) >= limit:
            break
        if candidate.id not in taken:
            chosen.append(candidate)
    return ranked(chosen)
