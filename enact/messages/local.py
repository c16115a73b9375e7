"""The local channel's protocol: ``enact send`` over the control socket.

Served by the local channel component (``enact.channels.local``), not by an
actor: the request waits in the connection's thread for the event's outcome.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, request
from enact.messages.common import MAX_ID, MAX_TEXT, Origin

if TYPE_CHECKING:  # the replies' module is imported when a reply arrives, not before a send
    from enact.messages import inbox

NAME = "local"
"""The channel's name, and its wire prefix."""
IN_PROGRESS = "in_progress"
"""The status of a sent event that has no outcome yet when the wait ends."""
INTERRUPTED = "interrupted"
"""The status of a sent event whose daemon stopped while ``enact send`` waited;
the event's receipt is durable, so the next daemon finishes it."""
TAKEN_OVER = "taken over"
"""The ``error`` of an ``interrupted`` outcome whose daemon stopped because
another took its home over (``--takeover``); "" when it was simply stopped."""


@request("local.Send")
@dataclass(frozen=True, slots=True, kw_only=True)
class Send(Request["inbox.Outcome | inbox.Ignored"]):
    """``enact send``: the local channel's event; answered once it is replied."""

    text: str = field(metadata=limit(MAX_TEXT))
    conversation: str = field(default="cli", metadata=limit(MAX_ID))
    message_id: str = field(default="", metadata=limit(MAX_ID))
    reply_to: str = field(default="", metadata=limit(MAX_TEXT))
    origin: Origin = ""
