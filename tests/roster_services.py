"""What the roster needs to name the daemon's actors, without a daemon."""

from __future__ import annotations

from typing import Any, cast

from enact.chat.services import ChatServices
from enact.commands import CommandRegistry


def roster_services() -> ChatServices:
    """Services enough to list the roster's specs (none of them is started)."""
    return ChatServices(channels={}, runtime=cast(Any, None), commands=CommandRegistry(), startup_context="",
                        origins={})
