"""The scheduler protocol (actor ``scheduler``): cron schedules and the
backlog. Both end in ``tasks.Submit``: a schedule at each due time, a
backlog item when it is promoted (by its owner, or by ``tasks.auto_promote``
when nothing is queued or running)."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._codec import limit
from enact.messages._registry import Request, internal, reply, request
from enact.messages.common import NotFound, Origin, Refused
from enact.messages.tasks import Submitted
from enact.schedules import MAX_SPEC
from enact.tasks.scheduling import MAX_TEXT, BacklogItem, Priority, Schedule

_PATH = 4096

# -- cron ----------------------------------------------------------------


@request("scheduler.AddSchedule")
@dataclass(frozen=True, slots=True, kw_only=True)
class AddSchedule(Request["ScheduleAdded | Refused"]):
    """Submit ``request`` as a task at each due time of ``spec``
    (``every 10m``, ``every 1d``, ``daily 09:00`` or a cron expression: ``enact.schedules``)."""

    spec: str = field(metadata=limit(MAX_SPEC))
    request: str = field(metadata=limit(MAX_TEXT))
    repo: str = field(default="", metadata=limit(_PATH))
    origin: Origin = ""


@reply("scheduler.ScheduleAdded")
@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleAdded:
    schedule: Schedule
    next_due: float


@request("scheduler.ListSchedules")
@dataclass(frozen=True, slots=True, kw_only=True)
class ListSchedules(Request["ScheduleList"]):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleEntry:
    schedule: Schedule
    next_due: float


@reply("scheduler.ScheduleList")
@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleList:
    schedules: tuple[ScheduleEntry, ...]


@request("scheduler.RemoveSchedule")
@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveSchedule(Request["ScheduleRemoved | NotFound"]):
    schedule_id: int
    origin: Origin = ""


@reply("scheduler.ScheduleRemoved")
@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRemoved:
    schedule: Schedule


# -- the backlog ---------------------------------------------------------


@request("scheduler.AddItem")
@dataclass(frozen=True, slots=True, kw_only=True)
class AddItem(Request["ItemAdded | Refused"]):
    text: str = field(metadata=limit(MAX_TEXT))
    priority: Priority = Priority.P1
    repo: str = field(default="", metadata=limit(_PATH))
    origin: Origin = ""


@reply("scheduler.ItemAdded")
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemAdded:
    item: BacklogItem


@request("scheduler.ListItems")
@dataclass(frozen=True, slots=True, kw_only=True)
class ListItems(Request["Backlog"]):
    """The backlog in promotion order: highest priority, then oldest."""


@reply("scheduler.Backlog")
@dataclass(frozen=True, slots=True, kw_only=True)
class Backlog:
    items: tuple[BacklogItem, ...]


@request("scheduler.Promote")
@dataclass(frozen=True, slots=True, kw_only=True)
class Promote(Request["Promoted | NotFound | Refused"]):
    """Submit the item as a task and take it off the backlog."""

    item_id: int
    repo: str = field(default="", metadata=limit(_PATH))
    """The repository the task works on; "" for the item's (else ``tasks.default_repo``)."""
    origin: Origin = ""


@reply("scheduler.Promoted")
@dataclass(frozen=True, slots=True, kw_only=True)
class Promoted:
    item: BacklogItem
    submitted: Submitted


@request("scheduler.Drop")
@dataclass(frozen=True, slots=True, kw_only=True)
class Drop(Request["Dropped | NotFound"]):
    item_id: int
    origin: Origin = ""


@reply("scheduler.Dropped")
@dataclass(frozen=True, slots=True, kw_only=True)
class Dropped:
    item: BacklogItem


# -- the clock -----------------------------------------------------------


@internal("scheduler.Tick")
@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    """The scheduler's own timer: submit what is due."""
