"""Running a registered command by name (``enact call commands.Run``)."""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import Origin


@request("commands.Run")
@dataclass(frozen=True, slots=True, kw_only=True)
class Run(Request["Receipt"]):
    name: str = field(metadata=limit(128))
    args: dict[str, Any] = field(default_factory=dict)
    origin: Origin = ""
    # The same request id names the same run: a retry after a crash is
    # answered from the journal (done, or interrupted), never run again.
    # Empty means a fresh id.
    request_id: str = field(default="", metadata=limit(256))


class CommandOutcome(enum.Enum):
    """How a run ended, as data: what metrics and callers branch on."""

    OK = "ok"
    UNKNOWN_COMMAND = "unknown_command"
    BAD_ARGS = "bad_args"
    REFUSED = "refused"
    NOT_FOUND = "not_found"
    FAILED = "failed"


@reply("commands.Receipt")
@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """What running a command produced; ``ok`` is False for any refusal."""

    command: str
    ok: bool
    text: str
    outcome: CommandOutcome


@request("commands.ListCommands")
@dataclass(frozen=True, slots=True, kw_only=True)
class ListCommands(Request["Catalog"]):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandInfo:
    name: str
    summary: str
    authority: str
    params: tuple[str, ...]
    free_args: bool = False


@reply("commands.Catalog")
@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    commands: tuple[CommandInfo, ...]
