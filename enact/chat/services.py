"""What the inbox, the outbox and the conversation actors are given at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    origins: Mapping[str, Origin]
    """Each channel's origin, as its component vouches for it (``human-cli``
    for the local channel): which conversations are the owner's
    (``enact.ownership``)."""
