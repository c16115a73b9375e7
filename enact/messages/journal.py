"""The journal protocol: the steps of one request's action loop."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, reply, request
from enact.messages.common import Refused

StepState = Literal["planned", "running", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    request_id: str
    index: int
    command: str
    args: dict[str, Any]
    state: StepState
    receipt: str
    ok: bool
    updated_at: float


@request("journal.Plan", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(Request["Recorded | Refused"]):
    """Record a step before it runs; refused if that index exists already."""

    request_id: str = field(metadata=limit(256))
    index: int
    command: str = field(metadata=limit(128))
    args: dict[str, Any]


@request("journal.Start", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Start(Request["Recorded | Refused"]):
    request_id: str = field(metadata=limit(256))
    index: int


@request("journal.Finish", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Finish(Request["Recorded | Refused"]):
    request_id: str = field(metadata=limit(256))
    index: int
    receipt: str
    ok: bool


@reply("journal.Recorded")
@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    step: Step


@request("journal.Steps", plumbing=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Steps(Request["StepList"]):
    request_id: str = field(metadata=limit(256))


@reply("journal.StepList")
@dataclass(frozen=True, slots=True, kw_only=True)
class StepList:
    steps: tuple[Step, ...]
