"""``enact review list|show|diff|land|close``: the local reviews of tasks' work."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from enact.cli._client import expect, request
from enact.cli._options import end_on_failure, home_option, needs_daemon, print_json, resolve_home
from enact.cli._tasks import unlock_lines

if TYPE_CHECKING:
    from enact.messages.reviews import Review

def review_json(review: Review) -> dict[str, Any]:
    from enact.messages import to_wire
    from enact.messages.reviews import Found

    body: dict[str, Any] = to_wire(Found(review=review))["body"]["review"]
    return body


def _show(review: Review, task: Any) -> None:
    click.echo(f"review {review.id}  {review.state.value}  task {review.task_id}")
    click.echo(f"repo     {review.repo}")
    click.echo(f"branch   {review.branch}  {review.base[:12]}..{review.head[:12]}")
    if review.doctor_summary:
        click.echo(f"doctor   {review.doctor_summary}")
    if task is not None:
        for line in unlock_lines(task):
            click.echo(line)
    if review.note:
        click.echo(f"note     {review.note}")
    if review.diffstat:
        click.echo(review.diffstat.rstrip())


def _get(home: Path, review_id: int, as_json: bool) -> Review:
    from enact.messages.reviews import Found, Get

    message = Get(review_id=review_id)
    reply = request(home, message)
    end_on_failure(reply, as_json=as_json)
    return expect(reply, Found, message).review


@click.group("review")
def review() -> None:
    """Local reviews: a task's committed change, waiting to be landed or closed."""


@review.command("list")
@home_option
@click.option("--state", type=click.Choice(["open", "landed", "closed"]), default=None, help="Only this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of reviews).")
@needs_daemon
def list_reviews(home: Path | None, state: str | None, limit: int, as_json: bool) -> None:
    """The reviews, newest first."""
    from enact.messages.reviews import List, ReviewList, ReviewState

    message = List(state=ReviewState(state) if state else None, limit=limit)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    reviews = expect(reply, ReviewList, message).reviews
    if as_json:
        print_json([review_json(item) for item in reviews])
        return
    if not reviews:
        click.echo("no reviews")
    for item in reviews:
        click.echo(f"{item.id:>5}  {item.state.value:<7} task {item.task_id:<6} {item.branch}  {item.repo}")


@review.command("show")
@click.argument("review_id", type=int)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def show(review_id: int, home: Path | None, as_json: bool) -> None:
    """One review: task, repository, branch, revisions, diff stat, doctor."""
    from enact.messages.tasks import Found, Get

    where = resolve_home(home)
    found = _get(where, review_id, as_json)
    reply = request(where, Get(task_id=found.task_id))
    task = reply.task if isinstance(reply, Found) else None
    if as_json:
        unlocks = {"allow_paths": list(task.allow_paths), "allow_fewer_tests": task.allow_fewer_tests} \
            if task is not None else {}
        print_json({**review_json(found), **unlocks})
    else:
        _show(found, task)


@review.command("diff")
@click.argument("review_id", type=int)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def diff(review_id: int, home: Path | None, as_json: bool) -> None:
    """The review's change as a unified diff."""
    from enact.messages.reviews import Diff, ReviewDiff

    message = Diff(review_id=review_id)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    found = expect(reply, ReviewDiff, message)
    if as_json:
        print_json({"id": review_id, "diff": found.text, "truncated": found.truncated})
        return
    click.echo(found.text, nl=False)
    if found.truncated:
        click.echo("\n[diff cut here; see the branch for the rest]", err=True)


@review.command("land")
@click.argument("review_id", type=int)
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def land(review_id: int, home: Path | None, as_json: bool) -> None:
    """Merge the review's branch into its repository's checked-out branch,
    once the doctor passed on the merged result."""
    from enact.messages.reviews import Land, Landed

    message = Land(review_id=review_id)
    # The answer waits for the doctor on the merged result; one that runs past
    # control.request_timeout_s ends this wait, not the land (see `review show`).
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json, about=f"review {review_id} not landed")
    landed = expect(reply, Landed, message)
    if as_json:
        print_json({**review_json(landed.review), "fast_forward": landed.fast_forward,
                    "merged_by": landed.merged_by})
        return
    click.echo(f"review {review_id} {landed.review.note}")


@review.command("close")
@click.argument("review_id", type=int)
@click.option("--reason", default="", help="Why it is closed (kept on the review).")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def close(review_id: int, reason: str, home: Path | None, as_json: bool) -> None:
    """Close the review without landing it (its branch is deleted, if this home made it)."""
    from enact.messages.reviews import Close, Closed

    message = Close(review_id=review_id, reason=reason)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    closed = expect(reply, Closed, message)
    if as_json:
        print_json(review_json(closed.review))
        return
    click.echo(f"review {review_id} closed")
