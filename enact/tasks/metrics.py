"""The tasks feature's metrics: task events, tasks by state, the workers'
busy time, review lands and cron runs (the shape is
``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from enact.frozen_dataclass import dataclass
from enact.tasks.records import EventKind, TaskState


class WorkerTime(Collector):
    """The seconds workers have spent on task attempts, as
    ``enact_task_worker_busy_seconds_total``: those of ended attempts plus
    the running ones' so far, read at scrape time, so an attempt longer than
    a rate() window counts in each window it runs in rather than all at its
    end. Its rate over the worker count is the workers' utilisation."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ended_s = 0.0
        self._running: dict[int, float] = {}
        """Since when (monotonic) each attempt running now has run."""
        self._next = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Counts the time the block takes, however it ends."""
        with self._lock:
            self._next += 1
            key = self._next
            self._running[key] = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._ended_s += self._clock() - self._running.pop(key)

    def busy_seconds(self) -> float:
        with self._lock:
            now = self._clock()
            return self._ended_s + sum(now - since for since in self._running.values())

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily("enact_task_worker_busy_seconds",
                                  "Seconds the task workers spent running task attempts (all workers together)",
                                  value=self.busy_seconds())


@dataclass(frozen=True, slots=True)
class TasksMetrics:
    task_events: Counter
    tasks: Gauge
    workers: Gauge
    worker_time: WorkerTime
    review_lands: Counter
    cron_runs: Counter

    COUNTED_STATES: ClassVar[tuple[TaskState, ...]] = (TaskState.QUEUED, TaskState.RUNNING, TaskState.PAUSED)
    """The states ``enact_tasks`` counts: the tasks not ended (queued is the
    queue's depth). Ended tasks only accumulate; ``enact_task_events_total``
    counts them as they end."""
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
            tasks=Gauge("enact_tasks", "Tasks not ended, by state (queued: the queue's depth)", ["state"],
                        registry=registry),
            workers=Gauge("enact_task_workers", "Task workers the daemon runs (daemon.workers)", registry=registry),
            worker_time=WorkerTime(),
            review_lands=Counter("enact_review_lands", "Review land requests by outcome", ["outcome"],
                                 registry=registry),
            cron_runs=Counter("enact_cron_runs", "Due times of cron schedules by what they did", ["outcome"],
                              registry=registry),
        )
        registry.register(made.worker_time)
        for kind in EventKind:
            made.task_events.labels(event=kind.value)
        for state in cls.COUNTED_STATES:
            made.tasks.labels(state=state.value)
        for outcome in cls.LAND_OUTCOMES:
            made.review_lands.labels(outcome=outcome)
        for outcome in cls.CRON_OUTCOMES:
            made.cron_runs.labels(outcome=outcome)
        return made
