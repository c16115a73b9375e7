"""The overview, conversations, schedules and spending pages: what the
daemon is and has done, read only."""

from __future__ import annotations

import datetime
from typing import Any

from flask import Blueprint, render_template, request

from enact.console.app import ask
from enact.console.spending_chart import DayTokens, chart, colour, purposes_of
from enact.messages.accounting import SpentOn
from enact.messages.control import Status
from enact.messages.inbox import ReadTurns, Turn
from enact.messages.scheduler import ListItems, ListSchedules
from enact.messages.tasks import List as ListTasks
from enact.messages.workers import RemoteWorkers
from enact.tasks.records import TaskState

pages = Blueprint("overview", __name__)

SPENDING_DAYS = 14
_TURNS_SHOWN = 100
_SEARCH_PAGE = 500


def _tokens(purpose: Any) -> int:
    return int(purpose.input_tokens + purpose.output_tokens)


@pages.get("/")
def overview() -> Any:
    status = ask(Status())  # the full one: each actor's counts and the storage, as `enact status --verbose`
    queue = [(state.value, len(ask(ListTasks(state=state, limit=1000)).tasks))
             for state in (TaskState.QUEUED, TaskState.RUNNING, TaskState.PAUSED)]
    return render_template("overview.html", active="/", status=status, runtime=status.runtime,
                           queue=queue, today_tokens=sum(_tokens(p) for p in status.spending),
                           budgeted=any(line.limit for line in status.budget),
                           remote=ask(RemoteWorkers()).workers)


@pages.get("/conversations")
def conversations() -> Any:
    wanted = request.args.get("conversation", "")[:256]
    query = request.args.get("q", "").strip()[:200]
    if query:
        turns, searched = _search(wanted, query.casefold()), True
    else:
        turns, searched = list(ask(ReadTurns(conversation=wanted, last=_TURNS_SHOWN)).turns), False
    turns.reverse()  # newest first
    recent = ask(ReadTurns(last=500)).turns
    keys = sorted({f"{turn.channel}:{turn.conversation}" for turn in recent})
    return render_template("conversations.html", active="/conversations", turns=turns, keys=keys, wanted=wanted,
                           query=query, searched=searched)


@pages.get("/conversations/turns")
def conversation_turns() -> Any:
    wanted = request.args.get("conversation", "")[:256]
    turns = list(ask(ReadTurns(conversation=wanted, last=_TURNS_SHOWN)).turns)
    turns.reverse()
    return render_template("turns.html", turns=turns)


def _search(conversation: str, needle: str) -> list[Turn]:
    """Every turn whose message or reply holds ``needle``, read by cursor
    through the whole log (complete, not the last N); the newest 100."""
    found: list[Turn] = []
    cursor = 0
    while True:
        page = ask(ReadTurns(conversation=conversation, since=cursor, limit=_SEARCH_PAGE))
        found.extend(t for t in page.turns if needle in t.message.casefold() or needle in t.reply.casefold())
        found = found[-_TURNS_SHOWN:]
        if not page.turns or page.next_cursor <= cursor:
            return found
        cursor = page.next_cursor


@pages.get("/schedules")
def schedules() -> Any:
    return render_template("schedules.html", active="/schedules", schedules=ask(ListSchedules()).schedules,
                           backlog=ask(ListItems()).items)


@pages.get("/spending")
def spending() -> Any:
    today = datetime.date.today()
    days: list[DayTokens] = []
    rows: list[tuple[str, Any]] = []
    for back in range(SPENDING_DAYS - 1, -1, -1):
        day = (today - datetime.timedelta(days=back)).isoformat()
        spent = ask(SpentOn(day=day))
        days.append(DayTokens(day, {p.purpose: _tokens(p) for p in spent.purposes}))
        rows.extend((day, p) for p in spent.purposes)
    status = ask(Status(brief=True))  # only its budget
    limits = {line.purpose: line.limit for line in status.budget if line.limit}
    purposes = purposes_of(days, limits)
    legend = [(purpose, colour(purposes, purpose)) for purpose in purposes]
    return render_template("spending.html", active="/spending", chart=chart(days, limits), legend=legend,
                           rows=list(reversed(rows)), days=SPENDING_DAYS, budget=status.budget,
                           resets_at=status.budget_resets_at, limits=limits)
