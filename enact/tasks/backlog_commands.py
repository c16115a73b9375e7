"""The backlog and cron from chat: ``/backlog.list``, ``/backlog.add TEXT``
(``p0:`` or ``p2:`` before the text sets its priority), ``/backlog.promote
ID [REPO]`` and ``/cron.list``, through the command registry. Adding and promoting
are effects (the conversation lock or the owner's CLI); schedules are added
and removed from the CLI only."""

from __future__ import annotations

from typing import TypeVar

from enact.commands import Authority, Command, CommandCall, CommandContext, CommandFailed, Param, answered
from enact.messages._registry import Request
from enact.messages.scheduler import (
    AddItem,
    ListItems,
    ListSchedules,
    Promote,
)
from enact.tasks.scheduling import Priority, next_run_said

R = TypeVar("R")

_TEXT = {"text": Param(str, doc="the item's text", usage="[p0:|p2:] TEXT")}
_ID = {"text": Param(str, doc="a backlog item's id, then optionally the repository's absolute path",
                     usage="ID [REPO]"),
       "repo": Param(str, required=False, doc="the git repository (default: the item's, else tasks.default_repo)")}


def _ask_scheduler(context: CommandContext, message: Request[R]) -> R:
    return context.ask("scheduler", message)


def _list(_: CommandCall, context: CommandContext) -> str:
    reply = _ask_scheduler(context, ListItems())
    if not reply.items:
        return "the backlog is empty"
    return "Backlog:\n" + "\n".join(f"#{item.id} {item.priority.value} {item.text}" for item in reply.items)


def _add(call: CommandCall, context: CommandContext) -> str:
    text = str(call.args.get("text", "")).strip()
    priority = Priority.P1
    head, sep, rest = text.partition(":")
    if sep and head.strip().lower() in {p.value for p in Priority}:
        priority, text = Priority(head.strip().lower()), rest.strip()
    reply = answered(_ask_scheduler(context, AddItem(text=text, priority=priority, origin=call.origin)))
    return f"backlog item {reply.item.id} ({reply.item.priority.value})"


def _promote(call: CommandCall, context: CommandContext) -> str:
    # `/backlog.promote ID [REPO]`
    text, _, named = str(call.args.get("text", "")).strip().lstrip("#").partition(" ")
    if not text.isdigit():
        raise CommandFailed("/backlog.promote needs an item id, e.g. /backlog.promote 3")
    repo = str(call.args.get("repo", "")) or named.strip()
    reply = answered(_ask_scheduler(context, Promote(item_id=int(text), repo=repo, origin=call.origin)))
    return f"backlog item {reply.item.id} is task {reply.submitted.task.id}"


def _cron_list(_: CommandCall, context: CommandContext) -> str:
    reply = _ask_scheduler(context, ListSchedules())
    if not reply.schedules:
        return "no schedules"
    lines = []
    for entry in reply.schedules:
        when = next_run_said(entry.schedule, entry.next_due)
        lines.append(f"#{entry.schedule.id} {entry.schedule.spec}, {when}: {entry.schedule.request}")
    return "Schedules:\n" + "\n".join(lines)


def backlog_commands() -> list[Command]:
    return [
        Command(name="backlog.list", summary="the backlog, in promotion order", handler=_list),
        Command(name="backlog.add", summary="put work on the backlog (p0:, p1: or p2: before it)", handler=_add,
                authority=Authority.EFFECT, params=_TEXT),
        Command(name="backlog.promote", summary="make a backlog item a task", handler=_promote,
                authority=Authority.EFFECT, params=_ID),
        Command(name="cron.list", summary="the cron schedules", handler=_cron_list),
    ]
