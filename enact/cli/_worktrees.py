"""``enact worktree ...``: the task worktrees the workers keep."""

from __future__ import annotations

import time
from pathlib import Path

import click

from enact.cli._client import expect, request
from enact.cli._options import (
    EXIT_FAILED,
    EXIT_USAGE,
    end_on_failure,
    fail,
    home_option,
    needs_daemon,
    print_json,
    resolve_home,
)


@click.group("worktree")
def worktree() -> None:
    """The task worktrees under $ENACT_HOME/worktrees."""


@worktree.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def list_worktrees(home: Path | None, as_json: bool) -> None:
    """Every task worktree, with its task's state and whether it has uncommitted changes."""
    import orjson

    from enact.messages.workers import ListWorktrees

    message = ListWorktrees()
    listed = request(resolve_home(home), message)
    if as_json:
        print_json([orjson.loads(orjson.dumps(entry)) for entry in listed.worktrees])
        return
    if not listed.worktrees:
        click.echo("no worktrees")
        return
    for entry in listed.worktrees:
        changed = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.modified_at))
        dirty = ", uncommitted changes" if entry.dirty else ""
        click.echo(f"task {entry.task_id:<5} {entry.task_state or 'unknown':<9} {entry.path}  ({entry.branch} "
                   f"of {entry.repo or '?'}; changed {changed}{dirty})")


@worktree.command("cleanup")
@home_option
@click.argument("task_id", type=click.IntRange(min=1), required=False)
@click.option("--force", is_flag=True, help="Remove it even with uncommitted changes.")
@click.option("--orphaned-branches", is_flag=True,
              help="Delete this home's task branches that no task, kept worktree or open review needs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@needs_daemon
def cleanup(home: Path | None, task_id: int | None, force: bool, orphaned_branches: bool, as_json: bool) -> None:
    """Remove TASK_ID's kept worktree, and its branch unless a review still
    names it; with --orphaned-branches, delete every orphaned task branch."""
    from enact.messages.common import HUMAN_CLI

    if (task_id is None) == (not orphaned_branches):
        fail("name a TASK_ID or --orphaned-branches (one of them)", as_json=as_json, code=EXIT_USAGE)
    if task_id is None:
        _cleanup_branches(home, as_json)
        return
    from enact.messages.workers import CleanedUp, CleanupWorktree

    message = CleanupWorktree(task_id=task_id, force=force, origin=HUMAN_CLI)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    done = expect(reply, CleanedUp, message)
    if as_json:
        print_json({"task_id": done.task_id, "path": done.path, "removed": True, "branch": done.branch})
        return
    click.echo(f"removed {done.path}" + (f" and branch {done.branch}" if done.branch else ""))


def _cleanup_branches(home: Path | None, as_json: bool) -> None:
    from enact.messages.common import HUMAN_CLI
    from enact.messages.workers import BranchesCleanedUp, CleanupBranches

    message = CleanupBranches(origin=HUMAN_CLI)
    reply = request(resolve_home(home), message)
    end_on_failure(reply, as_json=as_json)
    done = expect(reply, BranchesCleanedUp, message)
    if as_json:
        print_json({"removed": list(done.removed), "failed": list(done.failed)})
    else:
        for line in done.removed:
            click.echo(f"deleted {line}")
        for line in done.failed:
            click.echo(f"kept: {line}")
        if not done.removed and not done.failed:
            click.echo("no orphaned branches")
    if done.failed:
        raise SystemExit(EXIT_FAILED)
