"""The chat feature's metrics: its events, their replies' deliveries and the
model's actions (the shape is ``enact.metrics.FeatureMetrics``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter

from enact.frozen_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class ChatMetrics:
    inbox_events: Counter
    deliveries: Counter
    actions: Counter

    INBOX_EVENT_OUTCOMES: ClassVar[tuple[str, ...]] = (
        "accepted",
        "duplicate",
        "not_allowed",
        "over_budget",
        "attempt_failed",
        "replied",
        "runtime_failed",
        "failed",
        "delivery_failed",
        "delivery_uncertain",
    )
    DELIVERY_OUTCOMES: ClassVar[tuple[str, ...]] = ("ok", "retry", "failed", "not_resent")
    ACTION_OUTCOMES: ClassVar[tuple[str, ...]] = (
        "ok", "limit", "bad_action", "unknown_command", "bad_args", "refused", "not_found", "failed",
    )
    """As ``enact.messages.commands.CommandOutcome``, and the loop's own ``limit`` and ``bad_action``."""

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Self:
        made = cls(
            inbox_events=Counter("enact_inbox_events", "Chat events by outcome", ["channel", "outcome"],
                                 registry=registry),
            deliveries=Counter("enact_inbox_deliveries", "Reply delivery attempts by outcome",
                               ["channel", "outcome"], registry=registry),
            actions=Counter("enact_conversation_actions", "Model actions by outcome", ["outcome"],
                            registry=registry),
        )
        for outcome in cls.ACTION_OUTCOMES:
            made.actions.labels(outcome=outcome)
        return made

    def add_channels(self, channels: Iterable[str]) -> None:
        """Each channel's series at 0 (the channels are known once the daemon
        has made them, after ``create``)."""
        for channel in channels:
            for outcome in self.INBOX_EVENT_OUTCOMES:
                self.inbox_events.labels(channel=channel, outcome=outcome)
            for outcome in self.DELIVERY_OUTCOMES:
                self.deliveries.labels(channel=channel, outcome=outcome)
