"""The backup protocol (actor ``backup``): a backup taken by the running
daemon, off its actors' threads, so that chat goes on meanwhile."""

from __future__ import annotations

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request
from enact.messages.common import Refused


@request("backup.Create")
@dataclass(frozen=True, slots=True, kw_only=True)
class Create(Request["Created | Refused"]):
    to: str = ""
    """A directory to write it in; empty: ``backup.dir``."""
    include_secrets: bool = False


@reply("backup.Created")
@dataclass(frozen=True, slots=True, kw_only=True)
class Created:
    path: str
    manifest_json: str
    """The manifest, as ``manifest.json`` holds it."""


__all__ = ["Create", "Created", "Refused"]
