"""Landing a review: merge its head into the repository's authoritative
branch (the branch its checkout has out), but only once the repository's
doctor passed on the merged result.

The merge is made and checked in a temporary worktree, detached, so the
owner's checkout changes only at the very end, by a fast-forward to a
result that passed. Every refusal leaves the checkout and its branch as
they were. git runs through ``sh`` (``enact.tasks.host_git``).

A merge commit is the owner's: the owner decided to land it. It is
authored and committed as the repository's configured ``user.name`` and
``user.email``, and its ``Landed-by`` trailer says enact made it; a
repository with no identity configured gets enact's, and the outcome says
so. The task's own commit, which the merge brings in, stays enact's: it is
the agent's work.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from enact.frozen_dataclass import dataclass
from enact.messages.reviews import LandRefusal
from enact.tasks.host_git import AUTHOR, WorktreeError, configured_identity, git
from enact.tasks.worktrees import authoritative_head

_MAX_REASON = 600


class DoctorVerdict(Protocol):
    """What landing needs of a doctor's result (``enact.tasks.doctor.DoctorResult``)."""

    @property
    def passed(self) -> bool: ...

    @property
    def summary(self) -> str: ...


Doctor = Callable[[Path, str], DoctorVerdict]
"""Runs the repository's checks in the given checkout (the merged result),
as the target's revision (the second argument) has them: never as the
branch being landed would have them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LandPlan:
    """What landing will merge: ``head`` into ``target`` of ``repo``."""

    repo: Path
    head: str
    message: str
    """The merge commit's message, when the merge is not a fast-forward
    (``merge_message``)."""


def merge_message(review_id: int, task_id: int, branch: str) -> str:
    """A landed review's merge commit message: what it lands, and a trailer
    saying that enact made the commit the owner decided on."""
    return (f"Land review {review_id} (task {task_id}, {branch})\n\n"
            f"Landed-by: enact (review {review_id}, task {task_id})")


@dataclass(frozen=True, slots=True, kw_only=True)
class LandOutcome:
    landed: bool
    target: str = ""
    revision: str = ""
    """The target's revision after landing."""
    fast_forward: bool = False
    merged_by: str = ""
    """``Name <email>`` of the merge commit's author and committer; "" for a fast-forward."""
    identity_note: str = ""
    """Why the merge commit is not the owner's (no identity configured), or ""."""
    doctor_summary: str = ""
    refusal: LandRefusal | None = None
    reason: str = ""


def refused(refusal: LandRefusal, reason: str, *, target: str = "", doctor_summary: str = "") -> LandOutcome:
    return LandOutcome(landed=False, refusal=refusal, reason=_clip(reason), target=target,
                       doctor_summary=doctor_summary)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


def _succeeds(cwd: Path, *args: str) -> bool:
    try:
        git(cwd, *args)
    except WorktreeError:
        return False
    return True


def dirty_paths(repo: Path) -> list[str]:
    """Tracked paths with uncommitted changes (untracked files do not count:
    a merge that would overwrite one fails and says so)."""
    status = git(repo, "status", "--porcelain", "--untracked-files=no")
    return [line[3:] for line in status.splitlines() if line.strip()]


def land(plan: LandPlan, *, scratch: Path, doctor: Doctor, current: Callable[[], bool]) -> LandOutcome:
    """Merge ``plan.head`` into the repository's checked-out branch if the
    doctor passes on the result; otherwise refuse with the reason.
    ``scratch`` is a directory that does not exist yet (the temporary
    worktree), removed again whatever happens. ``current`` says whether this
    daemon still holds the home (the epoch fence), asked right before the
    owner's checkout is changed."""
    repo = plan.repo
    try:
        target, tip = authoritative_head(repo)
    except WorktreeError as error:
        return refused(LandRefusal.GIT_FAILED, str(error))
    try:
        head = git(repo, "rev-parse", "--verify", "--quiet", f"{plan.head}^{{commit}}").strip()
    except WorktreeError:
        return refused(LandRefusal.GIT_FAILED, f"revision {plan.head} is not in {repo}", target=target)
    dirty = dirty_paths(repo)
    if dirty:
        return refused(LandRefusal.DIRTY_TARGET, f"{repo} has uncommitted changes ({', '.join(dirty[:5])}"
                       f"{', …' if len(dirty) > 5 else ''}); commit or stash them first", target=target)
    fast_forward = _succeeds(repo, "merge-base", "--is-ancestor", tip, head)
    try:
        git(repo, "worktree", "prune")  # forget temporary worktrees a crash left behind
        git(repo, "worktree", "add", "--detach", str(scratch), tip)
    except WorktreeError as error:
        return refused(LandRefusal.GIT_FAILED, str(error), target=target)
    try:
        return _merge_and_check(plan, scratch, doctor, current, target=target, tip=tip, head=head,
                                fast_forward=fast_forward)
    finally:
        # Not ``git worktree remove``: the doctor could write the scratch
        # worktree's ``.git``. Its directory goes, then the repository
        # forgets it.
        remove_scratch(scratch)
        _succeeds(repo, "worktree", "prune")


def _merge_and_check(plan: LandPlan, scratch: Path, doctor: Doctor, current: Callable[[], bool], *,
                     target: str, tip: str, head: str, fast_forward: bool) -> LandOutcome:
    repo = plan.repo
    merged_by = identity_note = ""
    if fast_forward:
        git(scratch, "merge", "--ff-only", "--quiet", head)
    else:
        identity = configured_identity(repo)
        if identity is None:
            identity = AUTHOR
            identity_note = (f"{repo} has no user.name and user.email configured: the merge commit is "
                             f"{AUTHOR[0]}'s")
        merged_by = f"{identity[0]} <{identity[1]}>"
        try:
            git(scratch, "merge", "--no-ff", "--no-edit", "--quiet", "-m", plan.message, head, identity=identity)
        except WorktreeError:
            conflicted = git(scratch, "diff", "--name-only", "--diff-filter=U").split()
            return refused(LandRefusal.CONFLICT, f"{plan.head[:12]} does not merge cleanly into {target}"
                           + (f" (conflicts in {', '.join(conflicted[:5])})" if conflicted else ""), target=target)
    merged = git(scratch, "rev-parse", "HEAD").strip()
    verdict = doctor(scratch, tip)
    if not verdict.passed:
        return refused(LandRefusal.DOCTOR_FAILED, f"the doctor failed on the merged result: {verdict.summary}",
                       target=target, doctor_summary=verdict.summary)
    # The doctor took a while: land only onto the tip it checked, and only
    # into a checkout that is still clean.
    if authoritative_head(repo) != (target, tip):
        return refused(LandRefusal.TARGET_MOVED, f"{target} moved while the doctor ran; land again",
                       target=target, doctor_summary=verdict.summary)
    dirty = dirty_paths(repo)
    if dirty:
        return refused(LandRefusal.DIRTY_TARGET, f"{repo} got uncommitted changes while the doctor ran "
                       f"({', '.join(dirty[:5])})", target=target, doctor_summary=verdict.summary)
    if not current():
        return refused(LandRefusal.FENCED, "this daemon was taken over (fenced) while the doctor ran",
                       target=target, doctor_summary=verdict.summary)
    try:
        git(repo, "merge", "--ff-only", "--quiet", merged)
    except WorktreeError as error:
        return refused(LandRefusal.GIT_FAILED, str(error), target=target, doctor_summary=verdict.summary)
    return LandOutcome(landed=True, target=target, revision=merged, fast_forward=fast_forward,
                       merged_by=merged_by, identity_note=identity_note, doctor_summary=verdict.summary)


def remove_scratch(scratch: Path) -> None:
    """Delete a temporary worktree's directory; its repository forgets it at
    its next ``git worktree prune`` (every land starts with one)."""
    shutil.rmtree(scratch, ignore_errors=True)


def diff(repo: Path, base: str, head: str, *, max_chars: int) -> tuple[str, bool]:
    """The unified diff ``base``..``head`` and whether it was cut at ``max_chars``."""
    text = git(repo, "diff", "--no-color", "--no-ext-diff", "--no-textconv", f"{base}..{head}")
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars], True
