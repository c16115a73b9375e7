"""The update protocol: the updater, a process outside the daemon, has the
serving daemon tell the owner how an attempt ended (``enact.update``)."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import MAX_ID, MAX_TEXT, Origin


@request("update.Notify")
@dataclass(frozen=True, slots=True, kw_only=True)
class Notify(Request["Noticed"]):
    """Tell the owner ``text`` once per ``notice_id``, on ``conversation``
    (``channel:id``, the chat that asked for the update) or, when it is "",
    on the conversation the lock names first."""

    text: str = field(metadata=limit(MAX_TEXT))
    notice_id: str = field(metadata=limit(MAX_ID))
    conversation: str = field(default="", metadata=limit(MAX_ID))
    origin: Origin = ""


@reply("update.Noticed")
@dataclass(frozen=True, slots=True, kw_only=True)
class Noticed:
    conversation: str
    """Where the notice went; "" when there was nowhere to send it (no
    conversation named and no conversation lock)."""
