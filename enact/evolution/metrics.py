"""The evolution feature's metrics: candidates, proposals, evidence scans and
signals (the shape is ``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter, Gauge

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class EvolutionMetrics:
    candidates: Gauge
    proposals: Counter
    scans: Counter
    signals: Gauge

    CANDIDATE_STATES: ClassVar[tuple[str, ...]] = ("active", "approved", "adopted", "removed", "rejected")
    """As ``enact.evolution.candidates.CandidateState``."""
    SOURCES: ClassVar[tuple[str, ...]] = ("feedback", "experience")
    SCAN_OUTCOMES: ClassVar[tuple[str, ...]] = ("completed", "failed", "nothing-new", "skipped")
    SIGNAL_STATES: ClassVar[tuple[str, ...]] = ("active", "linked", "dismissed", "resolved")

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(
            candidates=Gauge("enact_evolution_candidates", "Improvement candidates by state", ["state"],
                             registry=registry),
            proposals=Counter("enact_evolution_proposals", "Proposals the curator recorded", registry=registry),
            scans=Counter("enact_evolution_scans", "Evidence scans by source and outcome", ["source", "outcome"],
                          registry=registry),
            signals=Gauge("enact_evolution_signals", "Evidence signals by state", ["state"], registry=registry),
        )
        for state in cls.CANDIDATE_STATES:
            made.candidates.labels(state=state)
        for source in cls.SOURCES:
            for outcome in cls.SCAN_OUTCOMES:
                made.scans.labels(source=source, outcome=outcome)
        for state in cls.SIGNAL_STATES:
            made.signals.labels(state=state)
        return made
