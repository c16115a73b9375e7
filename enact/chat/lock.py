"""The conversation lock (``chat.allowed_conversations``): which chat
conversations are the owner's.

With a lock, only the conversations it names may talk to enact, and they are
the owner's; without one, anyone who finds the bot may talk to it, and no
chat is known to be the owner's. The local channel (origin ``human-cli``)
is always the owner's.
"""

from __future__ import annotations

from collections.abc import Iterable

from enact.messages.common import HUMAN_CLI, Origin
from enact.messages.inbox import ChatEvent


class ConversationLock:
    def __init__(self, allowed: Iterable[str]) -> None:
        self._allowed = frozenset(allowed)

    @property
    def configured(self) -> bool:
        return bool(self._allowed)

    def names(self, event: ChatEvent) -> bool:
        """The lock names the event's conversation (``channel:id`` or ``id``)."""
        return event.conversation_key in self._allowed or event.conversation in self._allowed

    def allows(self, event: ChatEvent) -> bool:
        """The event may talk to enact: no lock, or one that names it."""
        return not self._allowed or self.names(event)

    def owners(self, event: ChatEvent, origin: Origin) -> bool:
        """The event comes from the owner: the local CLI, or a conversation
        the lock names (an event accepted before the lock was set and resumed
        after is not)."""
        return origin == HUMAN_CLI or self.names(event)
