"""Saying a command in the language of whoever reads it.

The same hint reaches people in two places: a conversation on a channel,
where commands are typed ``/review.show 5`` (the local channel too, through
``enact send``), and a shell, where they are ``enact review show 5``. A hint
is one ``Said`` value holding both spellings; the audience picks one. The
asker reads the answer where they asked: what was asked in a conversation
(whatever the channel: the local one's origin is the owner's CLI, yet its
user typed a chat command) is said in chat, the rest at a shell. A notice
lands on a conversation, so it is always said in chat.
"""

from __future__ import annotations

import enum

from enact.frozen_dataclass import dataclass
from enact.messages.common import MODEL_ACTION, Origin


class Audience(enum.Enum):
    CHAT = "chat"
    """A person in a conversation: chat commands, their words typed after the name."""
    MODEL = "model"
    """A model's action: its reply goes to a conversation, so commands are said
    as in chat; its arguments are the JSON keys it sends."""
    CLI = "cli"
    """A person at a shell (``enact ...``, ``enact call``), and whatever the CLI
    shows later (a scheduled task's refusal, read with ``enact cron list``)."""

    @classmethod
    def of(cls, origin: Origin, *, in_conversation: bool) -> Audience:
        """Who reads the answer to a request of ``origin``, asked in a
        conversation or not."""
        if origin == MODEL_ACTION:
            return cls.MODEL
        return cls.CHAT if in_conversation else cls.CLI

    @property
    def in_chat(self) -> bool:
        """It reads chat commands (a person in chat, or a model answering one)."""
        return self is not Audience.CLI


@dataclass(frozen=True, slots=True)
class Said:
    """One thing to say, in chat's words and in the CLI's."""

    chat: str
    cli: str

    def to(self, audience: Audience) -> str:
        return self.chat if audience.in_chat else self.cli


def command(chat_name: str, cli_words: str, *args: object) -> Said:
    """A command with its arguments: ``command("review.show", "review show", 5)``
    is ``/review.show 5`` in chat and ``enact review show 5`` at a shell."""
    words = "".join(f" {arg}" for arg in args)
    return Said(chat=f"/{chat_name}{words}", cli=f"enact {cli_words}{words}")


__all__ = ["Audience", "Said", "command"]
