"""The tasks and reviews pages: the queue, one task's phases and live log,
the reviews, one review's diff, its doctor's counts, land and close."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, abort, redirect, render_template, request

from enact.console.app import ask, console_server, fragment_requested
from enact.console.diff_view import highlighted_diff
from enact.console.task_log import log_text
from enact.messages.common import NotFound, Refused
from enact.messages.reviews import Close, Diff, Get, Land, LandRefusal, ReviewState
from enact.messages.reviews import List as ListReviews
from enact.messages.tasks import Events, TaskPage
from enact.messages.tasks import Get as GetTask
from enact.messages.tasks import List as ListTasks
from enact.tasks.records import TaskState

pages = Blueprint("tasks", __name__)

_PAGE = 50
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)\b")
LAND_REFUSALS = {
    LandRefusal.NOT_HUMAN: "Only a person may land a review.",
    LandRefusal.NOT_OPEN: "This review is landed or closed already.",
    LandRefusal.DIRTY_TARGET: "The target checkout has uncommitted changes: commit or stash them, then land again.",
    LandRefusal.CONFLICT: "The branch does not merge cleanly into its target.",
    LandRefusal.DOCTOR_FAILED: "The repository's checks failed on the merged result, so nothing was landed.",
    LandRefusal.TARGET_MOVED: "The target branch moved while the checks ran: land again.",
    LandRefusal.BUSY: "Another land into this repository is running: try again in a moment.",
    LandRefusal.GIT_FAILED: "The repository, its branch or a revision cannot be used.",
    LandRefusal.FENCED: "This daemon was taken over by another: use the console of the one running now.",
}
"""Why a land was refused, in words, by its code (every code has its words: a test holds them equal)."""


def _state_or_none(text: str) -> TaskState | None:
    try:
        return TaskState(text) if text else None
    except ValueError:
        abort(400)


def _tasks(chosen: str) -> dict[str, Any]:
    before = request.args.get("before", "")
    page: TaskPage = ask(ListTasks(state=_state_or_none(chosen), limit=_PAGE,
                                   before=int(before) if before.isdigit() else None))
    counts = [(state.value, len(ask(ListTasks(state=state, limit=1000)).tasks))
              for state in (TaskState.QUEUED, TaskState.RUNNING, TaskState.PAUSED)]
    return {"tasks": page.tasks, "next_before": page.next_before, "chosen": chosen, "counts": counts}


@pages.get("/tasks")
def tasks() -> Any:
    chosen = request.args.get("state", "")
    return render_template("tasks.html", active="/tasks", states=[s.value for s in TaskState], **_tasks(chosen))


@pages.get("/tasks/table")
def tasks_table() -> Any:
    return render_template("tasks_table.html", **_tasks(request.args.get("state", "")))


def _task_values(task_id: int) -> dict[str, Any]:
    found = ask(GetTask(task_id=task_id))
    if isinstance(found, NotFound):
        abort(404)
    events: list[Any] = []
    cursor = 0
    while True:  # complete, page by page
        page = ask(Events(task_id=task_id, cursor=cursor))
        if isinstance(page, NotFound):
            break
        events.extend(page.events)
        cursor = page.next_cursor
        if not page.more:
            break
    return {"task": found.task, "events": events}


@pages.get("/tasks/<int:task_id>")
def task(task_id: int) -> Any:
    values = _task_values(task_id)
    text, offset, clipped = log_text(console_server().home, task_id)
    return render_template("task.html", active="/tasks", log_text=text, log_offset=offset, log_clipped=clipped,
                           **values)


@pages.get("/tasks/<int:task_id>/summary")
def task_summary(task_id: int) -> Any:
    return render_template("task_summary.html", **_task_values(task_id))


@pages.get("/reviews")
def reviews() -> Any:
    return render_template("reviews.html", active="/reviews", reviews=ask(ListReviews(limit=100)).reviews)


@pages.get("/reviews/table")
def reviews_table() -> Any:
    return render_template("reviews_table.html", reviews=ask(ListReviews(limit=100)).reviews)


def doctor_counts(summary: str) -> list[tuple[str, int]]:
    """``[("passed", 3), ("failed", 1)]`` read from the doctor's summary line."""
    return [(name if name != "error" else "errors", int(count)) for count, name in _COUNT.findall(summary)]


def _review_head(review_id: int, outcome: str = "", outcome_kind: str = "") -> dict[str, Any]:
    found = ask(Get(review_id=review_id))
    if isinstance(found, NotFound):
        abort(404)
    review = found.review
    return {"review": review, "counts": doctor_counts(review.doctor_summary), "outcome": outcome,
            "outcome_kind": outcome_kind}


@pages.get("/reviews/<int:review_id>/head")
def review_head(review_id: int) -> Any:
    """The review's state, facts and actions: what its page fetches when the
    review is landed or closed elsewhere (``review-<id>``)."""
    return render_template("review_head.html", **_review_head(review_id))


@pages.get("/reviews/<int:review_id>")
def review(review_id: int) -> Any:
    values = _review_head(review_id)
    diff = ask(Diff(review_id=review_id))
    if isinstance(diff, Refused):
        diff_html, note = "", f"The diff cannot be shown: {diff.reason}"
    elif isinstance(diff, NotFound):
        abort(404)
    else:
        diff_html = highlighted_diff(diff.text)
        note = "The diff is cut short; `enact review diff` shows it whole." if diff.truncated else ""
    return render_template("review.html", active="/reviews", diff_html=diff_html, diff_note=note, **values)


def _answered(review_id: int, outcome: str, kind: str) -> Any:
    if not fragment_requested():
        return redirect(f"/reviews/{review_id}", code=303)
    return render_template("review_head.html", **_review_head(review_id, outcome, kind))


@pages.post("/reviews/<int:review_id>/land")
def land(review_id: int) -> Any:
    reply = ask(Land(review_id=review_id))
    if isinstance(reply, NotFound):
        abort(404)
    if isinstance(reply, Refused):
        words = LAND_REFUSALS.get(LandRefusal(reply.code)) if reply.code in set(LandRefusal) else None
        return _answered(review_id, f"Not landed. {words or ''} ({reply.reason})".replace("  ", " "), "refused")
    how = "fast-forward" if reply.fast_forward else f"merge commit by {reply.merged_by}"
    state = "landed" if reply.review.state is ReviewState.LANDED else reply.review.state.value
    return _answered(review_id, f"Review {review_id} {state} as {reply.review.landed_revision[:10]} ({how}).",
                     "done")


@pages.post("/reviews/<int:review_id>/close")
def close(review_id: int) -> Any:
    reason = request.form.get("reason", "").strip()[:1000]
    reply = ask(Close(review_id=review_id, reason=reason))
    if isinstance(reply, NotFound):
        abort(404)
    if isinstance(reply, Refused):
        return _answered(review_id, f"Not closed: {reply.reason}", "refused")
    return _answered(review_id, f"Review {review_id} closed without landing.", "done")
