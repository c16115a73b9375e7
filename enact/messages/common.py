"""Types shared by every actor protocol: origins and generic replies."""

from __future__ import annotations

from dataclasses import dataclass

from enact.messages._registry import reply

Origin = str
"""Who caused a message: ``human-cli``, ``chat:<channel>``, ``model-action``,
``scheduler`` or ``extension:<name>``. The control socket stamps
``human-cli`` itself; a caller cannot choose its own origin."""

MAX_ID = 256
"""Longest id (conversation, message, sender, event) a chat event may carry."""
MAX_TEXT = 64 * 1024
"""Longest text a chat event may carry."""

HUMAN_CLI: Origin = "human-cli"
MODEL_ACTION: Origin = "model-action"


def chat_origin(channel: str) -> Origin:
    return f"chat:{channel}"


def is_human(origin: Origin) -> bool:
    """A person typed it: the owner's CLI or a chat message (never a model)."""
    return origin == HUMAN_CLI or origin.startswith("chat:")


@reply("common.Rejected")
@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    """An expected refusal: the request was understood and declined."""

    reason: str


@reply("common.Done")
@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    """An acknowledgement with nothing more to say."""
