"""What the inbox, the outbox and the conversation actors are given at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from enact.channels import Channel
from enact.commands import CommandRegistry
from enact.messages.common import Origin
from enact.runtime import Runtime


@dataclass(frozen=True, slots=True, eq=False)
class ChatServices:
    channels: Mapping[str, Channel]
    runtime: Runtime
    commands: CommandRegistry
    startup_context: str
    origins: Mapping[str, Origin] = field(default_factory=dict)
    """Each channel's origin, as its events are stamped (``human-cli`` for
    the local channel): whose a conversation is when no event says so."""
