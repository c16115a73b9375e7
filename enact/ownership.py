"""The conversation lock (``chat.allowed_conversations``): which chat
conversations are the owner's.

The local channel (origin ``human-cli``: only the owner reaches the 0600
control socket) is always the owner's, lock or not: the lock is about chats.
With a lock, only the chats it names may talk to enact, and they are the
owner's; without one, anyone who finds the bot may talk to it, and no chat is
known to be the owner's. Only the owner's conversations are given memory
(facts, the private identity) or may change anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from enact.messages.common import HUMAN_CLI, Origin
from enact.messages.inbox import ChatEvent


class ConversationLock:
    """``origins``: each channel's origin, as its component vouches for it;
    the owner's are the channels whose events are the owner's at a shell.
    What a channel vouches for counts, not a receipt's origin: an event
    handed in through the control socket (``enact call inbox.Receive``) for
    a Telegram chat is still that chat's."""

    def __init__(self, allowed: Iterable[str], origins: Mapping[str, Origin]) -> None:
        self._allowed = frozenset(allowed)
        self._owners_channels = frozenset(name for name, origin in origins.items() if origin == HUMAN_CLI)

    def names(self, event: ChatEvent) -> bool:
        """The lock names the event's conversation (``channel:id`` or ``id``)."""
        return event.conversation_key in self._allowed or event.conversation in self._allowed

    def allows(self, event: ChatEvent) -> bool:
        """The event may talk to enact: the owner's, or no lock is configured."""
        return not self._allowed or self.owners(event)

    def at_owners_shell(self, event: ChatEvent) -> bool:
        """The event comes from a channel only the owner at a shell reaches
        (the local CLI): a budget never keeps it from an answer."""
        return event.channel in self._owners_channels

    def owners(self, event: ChatEvent) -> bool:
        """The event comes from the owner: the local CLI, or a conversation
        the lock names (an event accepted before the lock was set and resumed
        after is not)."""
        return event.channel in self._owners_channels or self.names(event)


def how_to_lock(conversation_key: str) -> str:
    """How the owner makes a chat theirs, in one sentence."""
    return (f"to make this chat the owner's, lock it to the owner: chat.allowed_conversations = "
            f"[\"{conversation_key}\"] in config.toml")


def not_the_owners(what: str, conversation_key: str) -> str:
    """The one line a conversation that is not the owner's gets when it asks
    for what is the owner's (``what``: "memory", "what task.list shows"):
    that it is the owner's, and how the owner makes the chat theirs."""
    return f"{what} is the owner's, and this conversation is not the owner's; {how_to_lock(conversation_key)}"


def notice_target(named: str, allowed_conversations: Iterable[str]) -> tuple[str, str] | None:
    """Where the owner is told something unasked: (channel, conversation),
    the one ``named`` (``channel:id``), else the first the conversation lock
    names; None when there is neither."""
    for key in (named, *allowed_conversations):
        channel, separator, conversation = key.partition(":")
        if separator and channel and conversation:
            return channel, conversation
    return None
