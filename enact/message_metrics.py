"""The actors' message metrics, counted without a lock.

Every message an actor handles is counted by type and timed
(``enact_actor_messages_total{actor,type}``,
``enact_actor_message_seconds{actor}``). Through prometheus_client each
count took a lock and a dozen Python calls, some 40 per chat event. Here each
actor incarnation keeps its own tally, written only by its own thread, and
the registry sums the tallies when it is scraped; a tally that stops (its
actor stopped, failed or retired) is folded into its family's totals, so the
counts outlive restarts as a counter's do. An idle read, answered in the
asker's thread (``enact.actors._idle_reads``), is counted under the lock."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0)
"""Upper bounds of the handling-time buckets, in seconds (then +Inf), each
shown as prometheus_client shows a bound (``repr``: ``0.0001``, ``1.0``)."""


class MessageTally:
    """One actor incarnation's counts, or a family's folded totals."""

    __slots__ = ("buckets", "counts", "family", "seconds")

    def __init__(self, family: str) -> None:
        self.family = family
        self.counts: dict[str, int] = {}
        """Messages handled, by type."""
        self.buckets = [0] * (len(BUCKETS) + 1)
        """Messages by the first bucket their handling time fits (the last: +Inf)."""
        self.seconds = 0.0

    def count(self, label: str, seconds: float) -> None:
        """A message of type ``label`` handled in ``seconds``: only the owner's thread calls this."""
        counts = self.counts
        counts[label] = counts.get(label, 0) + 1
        self.buckets[bisect_left(BUCKETS, seconds)] += 1
        self.seconds += seconds

    def add(self, other: MessageTally) -> None:
        for label, count in dict(other.counts).items():
            self.counts[label] = self.counts.get(label, 0) + count
        for index, count in enumerate(list(other.buckets)):
            self.buckets[index] += count
        self.seconds += other.seconds


class ActorMessages(Collector):
    """The two metric families, collected from every tally."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._live: set[MessageTally] = set()
        self._retired: dict[str, MessageTally] = {}
        registry.register(self)

    def tally(self, family: str) -> MessageTally:
        """A new actor's tally: its family's series exist from now on."""
        tally = MessageTally(family)
        with self._lock:
            self._live.add(tally)
        return tally

    def retire(self, tally: MessageTally) -> None:
        """The actor of ``tally`` handles no more messages: fold it into its family's totals."""
        with self._lock:
            if tally in self._live:
                self._live.discard(tally)
                self._retired_of(tally.family).add(tally)

    def count_elsewhere(self, family: str, label: str) -> None:
        """A message answered outside its actor's thread (an idle read), counted
        as handled; its time is the asker's, not the actor's, and is not observed."""
        with self._lock:
            counts = self._retired_of(family).counts
            counts[label] = counts.get(label, 0) + 1

    def _retired_of(self, family: str) -> MessageTally:
        found = self._retired.get(family)
        if found is None:
            found = self._retired[family] = MessageTally(family)
        return found

    def collect(self) -> Iterable[Metric]:
        totals: dict[str, MessageTally] = {}
        with self._lock:
            tallies = [*self._retired.values(), *self._live]
            for tally in tallies:  # a live tally may count meanwhile: each copy is taken in one step
                total = totals.get(tally.family)
                if total is None:
                    total = totals[tally.family] = MessageTally(tally.family)
                total.add(tally)
        messages = CounterMetricFamily("enact_actor_messages", "Messages handled, by actor and message type",
                                       labels=["actor", "type"])
        seconds = HistogramMetricFamily("enact_actor_message_seconds", "Time spent handling one message",
                                        labels=["actor"])
        for family, total in sorted(totals.items()):
            for label, count in sorted(total.counts.items()):
                messages.add_metric([family, label], count)
            cumulative, buckets = 0, []
            for bound, count in zip((*BUCKETS, float("inf")), total.buckets, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
            seconds.add_metric([family], buckets, total.seconds)
        yield messages
        yield seconds
