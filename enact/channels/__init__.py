"""Chat channels: where events come from and replies go.

A channel hands events to the inbox, delivers replies, and declares what it
can promise (``idempotent_delivery``: re-sending a reply whose first delivery
had an unknown outcome does no harm). This issue ships the ``local`` channel;
others implement the same small interface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from enact.messages.common import Origin
from enact.messages.inbox import ChatEvent, Outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingReply:
    event_id: str
    channel: str
    conversation: str
    message_id: str
    text: str
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryReport:
    ok: bool
    retryable: bool = False
    error: str = ""


Submit = Callable[[ChatEvent, Origin], object]
"""Hands an event to the inbox with the origin the channel vouches for
(``chat:<channel>``); returns the inbox's Accepted or Ignored reply."""


class Channel(Protocol):
    name: str
    idempotent_delivery: bool

    def start(self, submit: Submit) -> None:
        """Begin receiving events (a polling channel starts its loop here)."""

    def stop(self) -> None: ...

    def deliver(self, reply: OutgoingReply) -> DeliveryReport:
        """Deliver one reply. May block; the inbox calls it off its thread."""

    def acknowledge(self, cursor: int) -> None:
        """Every event up to ``cursor`` is finished; the channel may drop them."""

    def finished(self, outcome: Outcome) -> None:
        """An event is done (replied and logged, or terminally failed)."""
