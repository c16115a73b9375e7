"""``enact backlog add|list|promote|drop`` and ``enact cron add|list|remove``:
work for later, and work on a clock (the Scheduler actor)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import orjson

from enact.cli._client import expect, request
from enact.cli._options import end_on_failure, home_option, needs_daemon, print_json, resolve_home
from enact.cli._repo import repo_option, sent_repo


def _plain(record: object) -> Any:
    """A record as JSON data (orjson writes dataclasses and enums as they are)."""
    return orjson.loads(orjson.dumps(record))


def _when(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment))


# -- backlog -------------------------------------------------------------


@click.group("backlog")
def backlog() -> None:
    """Work for later: items with a priority (p0 first), not tasks yet."""


@backlog.command("add")
@click.argument("text")
@click.option("--priority", type=click.Choice(["p0", "p1", "p2"]), default="p1", show_default=True)
@repo_option("the one named at promote, else tasks.default_repo")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def backlog_add(text: str, priority: str, repo: Path | None, home: Path | None, as_json: bool) -> None:
    """Put TEXT on the backlog."""
    from enact.messages.scheduler import AddItem, ItemAdded
    from enact.tasks.scheduling import Priority

    message = AddItem(text=text, priority=Priority(priority), repo=sent_repo(repo))
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    item = expect(reply, ItemAdded, message).item
    if as_json:
        print_json(_plain(item))
        return
    click.echo(f"backlog item {item.id} ({item.priority.value})")


@backlog.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of items).")
@needs_daemon
def backlog_list(home: Path | None, as_json: bool) -> None:
    """The backlog in promotion order: p0 first, oldest first."""
    from enact.messages.scheduler import ListItems

    message = ListItems()
    items = request(resolve_home(home), message).items
    if as_json:
        print_json([_plain(item) for item in items])
        return
    if not items:
        click.echo("the backlog is empty")
    for item in items:
        click.echo(f"{item.id:>5}  {item.priority.value}  {_when(item.created_at)}  {item.text}")


@backlog.command("promote")
@click.argument("item_id", type=int)
@repo_option("the item's, else tasks.default_repo")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def backlog_promote(item_id: int, repo: Path | None, home: Path | None, as_json: bool) -> None:
    """Make the item a task (it leaves the backlog)."""
    from enact.messages.scheduler import Promote, Promoted

    message = Promote(item_id=item_id, repo=sent_repo(repo))
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    promoted = expect(reply, Promoted, message)
    task = promoted.submitted.task
    if as_json:
        print_json({"item": _plain(promoted.item), "task_id": task.id, "existing": promoted.submitted.existing})
        return
    click.echo(f"backlog item {item_id} is task {task.id}")


@backlog.command("drop")
@click.argument("item_id", type=int)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def backlog_drop(item_id: int, home: Path | None, as_json: bool) -> None:
    """Take the item off the backlog without doing it."""
    from enact.messages.scheduler import Drop, Dropped

    message = Drop(item_id=item_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    dropped = expect(reply, Dropped, message).item
    if as_json:
        print_json(_plain(dropped))
        return
    click.echo(f"backlog item {item_id} dropped")


# -- cron ----------------------------------------------------------------


@click.group("cron")
def cron() -> None:
    """Tasks on a clock: every 10m, every 2h, every 1d, daily 09:00, or a cron expression."""


@cron.command("add")
@click.argument("spec")
@click.argument("text")
@repo_option("tasks.default_repo")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def cron_add(spec: str, text: str, repo: Path | None, home: Path | None, as_json: bool) -> None:
    """Submit TEXT as a task at each due time of SPEC ('every 2h', '0 9 * * 1-5')."""
    from enact.messages.scheduler import AddSchedule, ScheduleAdded
    from enact.tasks import scheduling

    message = AddSchedule(spec=spec, request=text, repo=sent_repo(repo))
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    added = expect(reply, ScheduleAdded, message)
    if as_json:
        print_json({**_plain(added.schedule), "next_due": added.next_due})
        return
    click.echo(f"schedule {added.schedule.id} ({added.schedule.spec}), "
               f"first due {scheduling.moment_said(added.schedule.spec, added.next_due)}")


@cron.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of schedules).")
@needs_daemon
def cron_list(home: Path | None, as_json: bool) -> None:
    """The schedules, with when each is next due (or its pending claim; to
    the second for an interval finer than a minute), its latest task, the
    due times given up and its repository."""
    from enact.messages.scheduler import ListSchedules
    from enact.tasks import scheduling

    message = ListSchedules()
    entries = request(resolve_home(home), message).schedules
    if as_json:
        print_json([{**_plain(entry.schedule), "next_due": entry.next_due} for entry in entries])
        return
    if not entries:
        click.echo("no schedules")
    for entry in entries:
        schedule = entry.schedule
        last = f"task {schedule.last_task}" if schedule.last_task is not None else "no task yet"
        failures = scheduling.failures_said(schedule)
        click.echo(f"{schedule.id:>5}  {schedule.spec:<16} {scheduling.next_run_said(schedule, entry.next_due)}  "
                   f"{last}{'  ' + failures if failures else ''}  {scheduling.repo_said(schedule)}  "
                   f"{schedule.request}")


@cron.command("remove")
@click.argument("schedule_id", type=int)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def cron_remove(schedule_id: int, home: Path | None, as_json: bool) -> None:
    """Remove a schedule (its tasks stay)."""
    from enact.messages.scheduler import RemoveSchedule, ScheduleRemoved

    message = RemoveSchedule(schedule_id=schedule_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    removed = expect(reply, ScheduleRemoved, message).schedule
    if as_json:
        print_json(_plain(removed))
        return
    click.echo(f"schedule {schedule_id} removed")
