"""The channels protocol: what ``enact channel list`` and ``enact status``
say about each chat channel. Served by the daemon itself, which knows every
installed channel, enabled or not."""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request

UP = "up"
DOWN = "down"
STARTING = "starting"
STOPPED = "stopped"
DISABLED = "disabled"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelState:
    """One channel as it runs: ``state`` is up (its last poll or call
    worked), down (it failed; the channel keeps trying), starting, stopped or
    disabled; ``cursor`` is the position acknowledged to it (0 for a channel
    without cursors); ``last_error`` the latest failure, "" if none, never
    holding a credential."""

    name: str
    state: str
    cursor: int = 0
    last_error: str = ""
    last_error_at: float | None = None
    delivery_failures: int = 0
    """Replies the channel refused for good (a blocked bot, an unknown chat)."""


@request("channel.List")
@dataclass(frozen=True, slots=True, kw_only=True)
class List(Request["Channels"]):
    """Every installed channel, its state, cursor and last error."""


@reply("channel.Channels")
@dataclass(frozen=True, slots=True, kw_only=True)
class Channels:
    channels: tuple[ChannelState, ...]
