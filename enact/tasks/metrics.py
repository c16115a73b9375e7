"""The tasks feature's metrics: task events, review lands and cron runs (the
shape is ``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter

from enact.tasks.records import EventKind


@dataclass(frozen=True, slots=True)
class TasksMetrics:
    task_events: Counter
    review_lands: Counter
    cron_runs: Counter

    LAND_OUTCOMES: ClassVar[tuple[str, ...]] = (
        "landed", "not-human", "not-open", "dirty-target", "conflict", "doctor-failed", "target-moved", "busy",
        "git-failed", "fenced",
    )
    """``landed`` or a refusal (``enact.messages.reviews.LandRefusal``)."""
    CRON_OUTCOMES: ClassVar[tuple[str, ...]] = ("submitted", "skipped-busy", "skipped-budget", "refused", "failed")

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(
            task_events=Counter("enact_task_events", "Task lifecycle events by kind", ["event"], registry=registry),
            review_lands=Counter("enact_review_lands", "Review land requests by outcome", ["outcome"],
                                 registry=registry),
            cron_runs=Counter("enact_cron_runs", "Due times of cron schedules by what they did", ["outcome"],
                              registry=registry),
        )
        for kind in EventKind:
            made.task_events.labels(event=kind.value)
        for outcome in cls.LAND_OUTCOMES:
            made.review_lands.labels(outcome=outcome)
        for outcome in cls.CRON_OUTCOMES:
            made.cron_runs.labels(outcome=outcome)
        return made
