"""What a task attempt tells the model: the task's prompt and each repair's.

The task prompt carries the request, the brief, the repository's notes
(``AGENTS.md``, read inside the worktree only and clipped) and the rules the
change is validated by; a repair prompt carries what the validation found.
"""

from __future__ import annotations

import logging

from enact.safe_files import UnsafeFile, read_inside
from enact.tasks import doctor
from enact.tasks.records import Task, clip
from enact.tasks.validation import Validation
from enact.tasks.worktrees import Worktree

log = logging.getLogger("enact.tasks.worker")  # its warnings are the attempt's

NOTES_FILE = "AGENTS.md"
_NOTES_LIMIT = 4_000
_NOTES_READ_LIMIT = 256 * 1024
"""A larger notes file is not read at all (a note says so), not read whole to be clipped."""


def task_prompt(task: Task, tree: Worktree, validation: Validation) -> str:
    try:
        text = read_inside(tree.path, NOTES_FILE, limit=_NOTES_READ_LIMIT)
        notes = "(none)" if text is None else clip(text, _NOTES_LIMIT)
    except UnsafeFile as error:
        log.warning("task %d: %s", task.id, error)
        notes = f"(none: {error})"
    return "\n".join([
        f"You are working on task {task.id} in a git worktree of {tree.repo} (branch {tree.branch}, made from "
        f"{tree.base_branch} at {tree.base[:12]}). Change files in the current directory only. git works here, on "
        "a repository of this worktree's own (your commits stay in it): the host takes the files as you leave "
        "them, commits them and hands the change to the owner for review.",
        "", "Request:", task.request,
        "", "Brief:", task.brief or "(none)",
        "", f"Repository notes ({NOTES_FILE}):", notes,
        "", f"Validation: {validation.rules()}",
    ])


def repair_prompt(round_: int, repairs: int, result: doctor.DoctorResult) -> str:
    return (f"repair {round_}/{repairs}: validation failed: {result.summary}\n\nThe checks' output (head and "
            f"tail):\n{result.head_tail}\n\nFix the cause in the worktree and answer when done.")
