"""What the inbox's rules (``enact.chat.inbox``) hand the inbox actor to
carry out once a commit is durable: each effect a frozen value, taken by the
actor with ``Inbox.take_effects`` and carried out in order."""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages.inbox import HandleEvent, NoticeTaken, Outcome, Retry, TurnLogged
from enact.messages.outbox import Deliver
from enact.messages.sessions import AddNote


@dataclass(frozen=True, slots=True)
class Count:
    """An event's outcome on a channel, counted (``enact_inbox_events``)."""

    channel: str
    outcome: str


@dataclass(frozen=True, slots=True)
class CountDelivery:
    """A reply delivered at its first attempt, counted as the outbox counts one (``enact_deliveries``)."""

    channel: str


@dataclass(frozen=True, slots=True)
class ToConversation:
    """Hand ``message`` to the conversation actor of ``key``; ``work`` counts
    as running there until ``ConversationDone(work)``."""

    key: str
    work: str
    message: HandleEvent


@dataclass(frozen=True, slots=True)
class ConversationDone:
    work: str


@dataclass(frozen=True, slots=True)
class Later:
    """Tell the inbox ``message`` after ``delay_s``."""

    delay_s: float
    message: Retry


@dataclass(frozen=True, slots=True)
class Tell:
    actor: str
    message: Deliver | NoticeTaken | AddNote


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """The channel's events up to ``cursor`` are finished."""

    channel: str
    cursor: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The channel hears how its event ended."""

    channel: str
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Publish:
    event: TurnLogged


Effect = Count | CountDelivery | ToConversation | ConversationDone | Later | Tell | Acknowledge | Finished | Publish
