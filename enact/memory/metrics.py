"""The memory feature's metrics: its facts by state (the shape is
``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Gauge


@dataclass(frozen=True, slots=True)
class MemoryMetrics:
    facts: Gauge

    FACT_STATES: ClassVar[tuple[str, ...]] = ("active", "pending")

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(facts=Gauge("enact_memory_facts", "Remembered facts by state", ["state"], registry=registry))
        for state in cls.FACT_STATES:
            made.facts.labels(state=state)
        return made
