"""The memory feature's metrics: its facts by state and how long recall
takes (the shape is ``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Gauge, Histogram

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class MemoryMetrics:
    facts: Gauge
    recall_seconds: Histogram

    FACT_STATES: ClassVar[tuple[str, ...]] = ("active", "pending")

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(
            facts=Gauge("enact_memory_facts", "Remembered facts by state", ["state"], registry=registry),
            recall_seconds=Histogram(
                "enact_memory_recall_seconds",
                "Time memory took to answer one context request: the startup context and the facts recalled "
                "for the message (each model call of a conversation asks one)",
                buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
                registry=registry,
            ),
        )
        for state in cls.FACT_STATES:
            made.facts.labels(state=state)
        return made
