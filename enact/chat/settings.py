"""The chat path's settings (``chat``): its keys, and the typed value its actors read."""

from __future__ import annotations

from enact.config import WEEK, Config, Setting, between
from enact.frozen_dataclass import dataclass

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "chat.allowed_conversations",
        list,
        [],
        "The owner's chats (channel:id or id): only they may talk to enact; empty means no lock "
        "(the local CLI is always the owner's)",
    ),
    Setting("chat.max_attempts", int, 3, "Processing attempts per chat event", between(1, 10)),
    Setting("chat.delivery_attempts", int, 3, "Delivery attempts per reply", between(1, 10)),
    Setting("chat.delivery_backoff_s", float, 0.5, "First retry delay of a failed delivery", between(0, 60)),
    Setting("chat.max_actions", int, 6, "Model actions per chat event", between(1, 50)),
    Setting("chat.conversation_idle_s", float, 300.0, "An idle conversation actor stops after this",
            between(0.1, WEEK)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatSettings:
    allowed_conversations: tuple[str, ...]
    """The conversation lock (``enact.ownership``); empty: no lock."""
    max_attempts: int
    delivery_attempts: int
    delivery_backoff_s: float
    max_actions: int
    conversation_idle_s: float

    @classmethod
    def from_config(cls, config: Config) -> ChatSettings:
        values = config.values
        return cls(
            allowed_conversations=tuple(values["chat.allowed_conversations"]),
            max_attempts=values["chat.max_attempts"],
            delivery_attempts=values["chat.delivery_attempts"],
            delivery_backoff_s=values["chat.delivery_backoff_s"],
            max_actions=values["chat.max_actions"],
            conversation_idle_s=values["chat.conversation_idle_s"],
        )
