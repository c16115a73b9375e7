"""The console protocol: ``enact console`` asks the daemon for a link to
its web console that signs the owner in once (``console.Login``)."""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request
from enact.messages.common import Refused


@request("console.Login")
@dataclass(frozen=True, slots=True, kw_only=True)
class Login(Request["LoginLink | Refused"]):
    """A fresh one-time login token for the console. Whoever reaches the
    control socket is the owner, so it is the owner who gets it; refused
    when the console is off or not serving."""


@reply("console.LoginLink")
@dataclass(frozen=True, slots=True, kw_only=True)
class LoginLink:
    address: str
    """``HOST:PORT`` the console answers on (the port it bound, for port 0)."""
    url: str
    """Opens the console and spends the token: ``http://ADDRESS/login?token=TOKEN``."""
    token: str
    expires_at: float
    """Epoch seconds; unspent by then, the token is void."""


__all__ = ["Login", "LoginLink", "Refused"]
