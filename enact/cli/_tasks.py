"""``enact task ...``: queue, read, watch, cancel, retry and resume tasks."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

from enact.cli._client import UnexpectedReply, expect, request
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_TIMED_OUT,
    end_on_failure,
    fail,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)
from enact.cli._repo import repo_option, sent_repo

_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "paused")
_WATCH_POLL_S = 0.25


def _plain(record: Any) -> dict[str, Any]:
    """A record as JSON-ready values (enums by value), as the wire carries it."""
    value: dict[str, Any] = orjson.loads(orjson.dumps(record))
    return value


def _task_json(task: Any, events: list[Any] | None = None) -> dict[str, Any]:
    """A task as ``--json`` prints it: its record, with ``phase`` as shown
    (``repair 1/2``), ``review`` (its id or null) and, for ``show``, its events."""
    body = _plain(task)
    body["phase"] = task.progress
    body["review"] = task.review_id or None
    if events is not None:
        body["events"] = [{"cursor": item.cursor, **_plain(item.event)} for item in events]
    return body


def unlock_lines(task: Any) -> list[str]:
    """What the owner unlocked for ``task`` (``task show``, ``review show``)."""
    lines = [f"unlocked  {', '.join(task.allow_paths)} (protected paths the owner allowed it to change)"] \
        if task.allow_paths else []
    if task.allow_fewer_tests:
        lines.append("unlocked  fewer tests than its base runs (the owner allowed it)")
    return lines


def _get(home: Path, task_id: int, as_json: bool) -> Any:
    from enact.messages.tasks import Found, Get

    message = Get(task_id=task_id)
    reply = request(home, message)
    end_on_failure(reply, as_json=as_json)
    return expect(reply, Found, message).task


def _all_events(home: Path, task_id: int) -> list[Any]:
    from enact.messages.tasks import EventPage, Events

    events: list[Any] = []
    cursor = 0
    while True:
        message = Events(task_id=task_id, cursor=cursor, limit=1000)
        page = expect(request(home, message), EventPage, message)
        events += page.events
        cursor = page.next_cursor
        if not page.more:
            return events


def _line(task: Any) -> str:
    progress = f" [{task.progress}]" if task.progress else ""
    text = " ".join(task.request.split())
    text = text if len(text) <= 60 else text[:59] + "…"
    return f"#{task.id:<5} {task.state:<9}{progress} attempt {task.attempt}  {text}"


@click.group("task")
def task() -> None:
    """Queue repository work and follow it."""


@task.command("add")
@home_option
@repo_option("tasks.default_repo")
@click.option("--repairs", type=int, default=2, show_default=True, help="Repair rounds after a failed check (0-5).")
@click.option("--deadline", type=int, default=600, show_default=True, help="Seconds the task may take (60-7200).")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="PATTERN",
              help="Unlock a protected path for this task (repeatable): tests/, conftest.py, pyproject.toml, ….")
@click.option("--allow-fewer-tests", is_flag=True,
              help="Let the change run fewer of the tests its base ran (skip or remove tests).")
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@click.argument("text", nargs=-1, required=True)
@needs_daemon
def add(home: Path | None, repo: Path | None, repairs: int, deadline: int, allow_paths: tuple[str, ...],
        allow_fewer_tests: bool, as_json: bool, text: tuple[str, ...]) -> None:
    """Queue TEXT as a task.

    What the words of TEXT say never unlocks a protected path (tests, CI,
    test-run configuration, .enact.toml): only --allow-path does."""
    from enact.messages.common import HUMAN_CLI
    from enact.messages.tasks import Submit, Submitted

    message = Submit(request=" ".join(text), repo=sent_repo(repo), origin=HUMAN_CLI, repairs=repairs,
                     deadline_s=deadline, allow_paths=allow_paths, allow_fewer_tests=allow_fewer_tests)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    submitted = expect(reply, Submitted, message)
    if as_json:
        print_json({**_task_json(submitted.task), "existing": submitted.existing})
        return
    click.echo(f"task {submitted.task.id} queued on {submitted.task.repo} (`enact task watch {submitted.task.id}`)")


@task.command("list")
@home_option
@click.option("--state", type=click.Choice(_STATES), default=None, help="Only tasks in this state.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=20, show_default=True,
              help="At most this many, newest first.")
@click.option("--before", type=click.IntRange(min=1), default=None, help="Only tasks older than this id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def list_tasks(home: Path | None, state: str | None, limit: int, before: int | None, as_json: bool) -> None:
    """List tasks, newest first."""
    from enact.messages.tasks import List
    from enact.tasks.records import TaskState

    message = List(state=TaskState(state) if state else None, limit=limit, before=before)
    page = request(resolve_home(home), message)
    if as_json:
        print_json([_task_json(t) for t in page.tasks])
        return
    if not page.tasks:
        click.echo("no tasks" + (f" {state}" if state else "") + (f" before #{before}" if before else ""))
        return
    for item in page.tasks:
        click.echo(_line(item))
    if page.next_before is not None:
        click.echo(f"(more: --before {page.next_before})")


@task.command("show")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("task_id", type=int)
@needs_daemon
def show(home: Path | None, as_json: bool, task_id: int) -> None:
    """Show one task with all its events."""
    from datetime import UTC, datetime

    where = resolve_home(home)
    found = _get(where, task_id, as_json)
    events = _all_events(where, task_id)
    if as_json:
        print_json(_task_json(found, events))
        return
    click.echo(_line(found))
    click.echo(f"repo      {found.repo}")
    click.echo(f"origin    {found.origin}" + (f" (retry of #{found.parent})" if found.parent else ""))
    confined = {None: "not run yet", True: "yes", False: "no"}[found.confined]
    click.echo(f"confined  {confined}{_unconfined_because(events) if found.confined is False else ''}")
    click.echo(f"repairs   {found.repairs}, deadline {found.deadline_s} s")
    for line in unlock_lines(found):
        click.echo(line)
    if found.worktree:
        # A worktree is removed after its review lands or by `worktree cleanup`: the record keeps the path.
        removed = "" if Path(found.worktree).exists() else " (removed)"
        click.echo(f"worktree  {found.worktree}{removed}")
    if found.review_id:
        click.echo(f"review    {found.review_id}")
    if found.summary:
        click.echo(f"summary   {found.summary}")
    if found.brief:
        click.echo("brief:")
        for line in found.brief.splitlines():
            click.echo(f"  {line}")
    click.echo("events:")
    for item in events:
        event = item.event
        when = datetime.fromtimestamp(event.time, UTC).strftime("%Y-%m-%d %H:%M:%S")
        who = f" {event.worker}" if event.worker else ""
        click.echo(f"  {when} {event.kind:<16} attempt {event.attempt}{who}  {event.summary}")


def _progress(item: Any, now: float) -> str:
    started = item.started_at or item.created_at
    phase = item.progress or ("waiting" if item.state == "queued" else "")
    return f"task {item.id} {item.state}{f' ({phase})' if phase else ''}, {now - started:.0f} s"


@task.command("watch")
@home_option
@click.option("--timeout", type=click.FloatRange(min=0), default=0, help="Stop watching after this many s (0: never).")
@click.option("--json", "as_json", is_flag=True, help="No progress lines; print the ended task as JSON.")
@click.argument("task_id", type=int)
@needs_daemon
def watch(home: Path | None, timeout: float, as_json: bool, task_id: int) -> None:
    """Show a live progress line until the task ends, then its outcome.

    Exits 0 if it succeeded, 1 if it failed, was cancelled or paused, 4 if
    --timeout passed first (status timed_out: the task goes on)."""
    from enact.tasks.records import TaskState

    where = resolve_home(home)
    deadline = time.monotonic() + timeout if timeout else None
    live = sys.stdout.isatty() and not as_json
    shown = ""
    while True:
        item = _get(where, task_id, as_json)
        state = TaskState(item.state)
        if state.ended or state is TaskState.PAUSED:
            break
        line = _progress(item, time.time())
        if live:
            click.echo(f"\r\033[K{line}", nl=False)
        elif not as_json and line.rsplit(",", 1)[0] != shown:  # a new line per change, not per second
            click.echo(line)
        shown = line.rsplit(",", 1)[0]
        if deadline is not None and time.monotonic() > deadline:
            if live:
                click.echo()
            fail(f"task {task_id} is still {state} after {timeout:g} s", as_json=as_json, code=EXIT_TIMED_OUT,
                 status="timed_out", id=task_id, state=str(state))
        time.sleep(_WATCH_POLL_S)
    if live:
        click.echo("\r\033[K", nl=False)
    if as_json:
        print_json(_task_json(item))
    else:
        review = f", review {item.review_id}" if item.review_id else ""
        click.echo(f"task {task_id} {item.state}{review}: {item.summary or 'no summary'}")
    if state is not TaskState.SUCCEEDED:
        sys.exit(EXIT_FAILED)


@task.command("log")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print {\"id\", \"path\", \"log\"} as JSON.")
@click.argument("task_id", type=int)
@needs_daemon
def log(home: Path | None, as_json: bool, task_id: int) -> None:
    """Print the task's full log (model progress, doctor output)."""
    from enact.tasks.records import task_log_path

    where = resolve_home(home)
    path = task_log_path(where, task_id)
    try:
        with open(path, "rb") as file:
            if as_json:
                text = file.read().decode(errors="replace")
                print_json({"id": task_id, "path": str(path), "log": text})
                return
            while chunk := file.read(1 << 16):
                sys.stdout.buffer.write(chunk)
    except FileNotFoundError:
        # No file is also what a task that does not exist has: only the daemon tells them apart.
        _get(where, task_id, as_json)
        fail(f"task {task_id} has no log yet ({path}); a worker writes it once the task runs", as_json=as_json)


def _owner_action(name: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @home_option
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.argument("task_id", type=int)
    @needs_daemon
    def action(home: Path | None, as_json: bool, task_id: int) -> None:
        from enact.messages.common import HUMAN_CLI
        from enact.messages.tasks import Cancel, CancelAccepted, Resume, Resumed, Retry, Submitted

        message: Any = {"cancel": Cancel, "retry": Retry, "resume": Resume}[name](task_id=task_id, origin=HUMAN_CLI)
        reply = request(resolve_home(home), message)
        end_on_failure(reply, as_json=as_json)
        if not isinstance(reply, (CancelAccepted, Submitted, Resumed)):
            raise UnexpectedReply(f"unexpected reply {type(reply).__name__} to tasks.{type(message).__name__}")
        result = reply
        if as_json:
            extra = ({"at_once": result.at_once} if isinstance(result, CancelAccepted) else
                     {"existing": result.existing} if isinstance(result, Submitted) else {})
            print_json({**_task_json(result.task), **extra})
            return
        if isinstance(result, CancelAccepted):
            click.echo(f"task {task_id} cancelled" if result.at_once else
                       f"task {task_id} is running: its worker stops it at its next heartbeat "
                       f"(`enact task watch {task_id}`)")
        elif isinstance(result, Submitted):
            click.echo(f"task {result.task.id} is already the retry of task {task_id}" if result.existing else
                       f"task {result.task.id} queued as a retry of task {task_id}")
        else:
            click.echo(f"task {task_id} queued again (attempt {result.task.attempt})")

    return action


task.add_command(_owner_action("cancel", "Cancel a task: at once if queued, cooperatively if running."))
task.add_command(_owner_action("retry", "Queue a failed or cancelled task again, as a new child task."))
task.add_command(_owner_action("resume", "Queue a paused task again."))


def _unconfined_because(events: list[Any]) -> str:
    """Why the latest attempt ran unconfined, as its workspace phase said."""
    for item in reversed(events):
        summary = item.event.summary
        if item.event.kind == "phase" and ("not confined: " in summary or "not run: " in summary):
            return f" ({summary[summary.find('not '):].rstrip(')')})"
    return ""
