"""The backup feature's metrics (the shape is ``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class BackupMetrics:
    backups: Counter
    seconds: Histogram
    last_success: Gauge

    REASONS: ClassVar[tuple[str, ...]] = ("cli", "schedule")
    OUTCOMES: ClassVar[tuple[str, ...]] = ("created", "failed")

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(
            backups=Counter("enact_backups", "Backups the daemon took, by reason and outcome",
                            ["reason", "outcome"], registry=registry),
            seconds=Histogram("enact_backup_seconds", "Time to take one backup",
                              buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120), registry=registry),
            last_success=Gauge("enact_backup_last_success_timestamp_seconds",
                               "When the last backup the daemon took was finished (0: none yet)",
                               registry=registry),
        )
        for reason in cls.REASONS:
            for outcome in cls.OUTCOMES:
                made.backups.labels(reason=reason, outcome=outcome)
        return made
