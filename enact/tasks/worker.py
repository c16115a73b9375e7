"""One task attempt, from claim to finish: the worker's logic, apart from its actor.

The worker speaks to the queue and the reviews only through typed messages
(``ask``), so this runs the same in the daemon's worker actors and in any
other process that can reach them. The steps, each reported as it starts:
workspace (a fresh worktree), model (the agentic runtime, confined), then
validate (the doctor) and up to ``repairs`` rounds of repair in the same
session, capture (a commit on the task branch) and review.
Before them, a review an earlier attempt of the task opened (it died before
its Finish) ends the attempt succeeded with that review, or cancelled when
the owner closed it meanwhile: nothing is redone.

A cancellation token ends the attempt early; its reason says who: the owner
(the next heartbeat says ``cancel_requested``: outcome ``cancelled``), the
deadline (failed, permanent), the daemon stopping gracefully (outcome
``interrupted``: queued again without counting the attempt), a lost lease or
a fence (nothing is reported: the task is no longer this worker's to finish).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from enact.actors._asks import ActorUnavailable
from enact.cancellation import DAEMON_STOPPING, CancellationToken
from enact.messages._registry import Request
from enact.messages.common import Rejected
from enact.messages.reviews import List, Open, Review, ReviewState
from enact.messages.tasks import Claimed, Finish, Heartbeat, LeaseLost, LeaseRenewed, ReportPhase
from enact.runtime import (
    CommandRun,
    Runtime,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeResult,
)
from enact.runtime._subprocess import TERM_GRACE_S
from enact.safe_files import UnsafeFile, read_inside
from enact.tasks import doctor, task_git, worktrees
from enact.tasks.confine import Confinement, ConfinementUnavailable, StateDir, confinement
from enact.tasks.finishing import finish_with_retries
from enact.tasks.host_git import WorktreeError
from enact.tasks.records import EventKind, FailureClass, Outcome, Phase, Task, clip, task_log_path
from enact.tasks.repo_config import RepoConfigError
from enact.tasks.validation import Validation
from enact.tasks.worktrees import Worktree

log = logging.getLogger(__name__)

R = TypeVar("R")

CANCELLED_BY_OWNER = "cancelled by the owner"
DEADLINE_EXCEEDED = "deadline exceeded"
LEASE_LOST = "lease lost"
NOTES_FILE = "AGENTS.md"
_NOTES_LIMIT = 4_000
_NOTES_READ_LIMIT = 256 * 1024
"""A larger notes file is not read at all (a note says so), not read whole to be clipped."""
_HEARTBEAT_MAX_S = 1.0
"""Heartbeats come at least this often, so a cancel is seen within about a second."""


class Asker(Protocol):
    def __call__(self, actor: str, message: Request[R]) -> R: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerServices:
    home: Path
    settings: Any
    """The daemon's Config."""
    runtime: Runtime
    ask: Asker


class _Stop(Exception):
    """The attempt ends without a Finish from this worker (lease lost, fenced)."""


@dataclass(frozen=True, slots=True)
class _Ending:
    outcome: Outcome
    summary: str
    failure_class: FailureClass | None = None
    retry_after_s: float | None = None
    review_id: str = ""
    keep_worktree: bool = True


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


class TaskAttempt:
    """Runs one claimed attempt to its end; ``run`` returns once the queue
    has its Finish (or the attempt is no longer this worker's)."""

    def __init__(self, claimed: Claimed, *, worker_id: str, services: WorkerServices,
                 parent: CancellationToken, fence: CancellationToken,
                 wind_down_s: float | None = None) -> None:
        """``parent`` cancels the attempt (the daemon stopping gracefully);
        ``fence`` only ends the asking for its Finish: a graceful stop is
        when that Finish (interrupted) matters most, a fenced daemon may no
        longer hand it over. ``wind_down_s``: how long a cancelled attempt
        keeps renewing its lease while its step stops; by default the
        subprocesses' kill grace plus one lease TTL."""
        self.task = claimed.task
        self.worker_id = worker_id
        self.services = services
        self.cancel = parent.child()
        self._fence = fence
        self._lease_ttl_s = claimed.lease_ttl_s
        self._renewed_at = time.monotonic()
        """When the lease was last renewed (claim, report, heartbeat), as far as this worker knows."""
        self.log_path = task_log_path(services.home, self.task.id)
        self._deadline = time.monotonic() + self.task.deadline_s
        self._heartbeat_s = min(_HEARTBEAT_MAX_S, claimed.lease_ttl_s / 3)
        self._wind_down_s = TERM_GRACE_S + claimed.lease_ttl_s if wind_down_s is None else wind_down_s
        self._wound_down_by = float("inf")
        """Past this (set when the attempt is cancelled) its lease is no longer renewed."""
        self.cancel.on_cancel(self._wind_down)
        self._phase = Phase.WORKSPACE
        self._native_session: str | None = None
        self._confined = False
        self._tree: Worktree | None = None
        self._validated: dict[str, str] = {}
        """The content hashes of the changed paths as the last doctor run found them."""

    # -- talking to the queue -------------------------------------------------

    def _report(self, phase: Phase, *, event: EventKind = EventKind.PHASE, repair: int = 0, summary: str = "",
                worktree: str = "", review_id: str = "", confined: bool | None = None) -> None:
        self._phase = phase
        reply = self.services.ask("tasks", ReportPhase(
            task_id=self.task.id, worker_id=self.worker_id, attempt=self.task.attempt, phase=phase, repair=repair,
            event=event, summary=clip(summary), worktree=worktree, review_id=review_id, confined=confined))
        if isinstance(reply, LeaseLost):
            self.cancel.cancel(LEASE_LOST)
            raise _Stop(reply.reason)
        self._renewed_at = time.monotonic()
        if event is EventKind.PHASE and self.cancel.cancelled:  # between steps: the next does not start
            raise RuntimeCancelled(self.cancel.reason)

    def _wind_down(self, reason: str) -> None:
        self._wound_down_by = time.monotonic() + self._wind_down_s

    def _heartbeats(self, stopped: threading.Event) -> None:
        """Renew the lease, and watch the deadline: a beat comes when it is
        due, so the attempt is cancelled on time. A cancelled attempt is
        still this worker's to finish: the beats go on while it winds down,
        or its Finish would find the lease lapsed; but only for the wind-down
        grace: a step that ignores the cancel (a hung git, a runtime that
        does not stop) would otherwise hold the task running for good. Its
        lease then lapses and the queue ends or requeues the task."""
        while not stopped.wait(self._next_beat_s()):
            if time.monotonic() >= self._deadline:  # a token keeps its first reason
                self.cancel.cancel(DEADLINE_EXCEEDED)
            if time.monotonic() >= self._wound_down_by:
                log.warning("task %d: attempt %d still runs %.0f s after it was cancelled (%s): its lease is "
                            "left to lapse", self.task.id, self.task.attempt, self._wind_down_s, self.cancel.reason)
                self._log(f"attempt {self.task.attempt} did not stop within {self._wind_down_s:.0f} s of its "
                          f"cancel ({self.cancel.reason}): the lease is no longer renewed")
                return
            try:
                reply = self.services.ask("tasks", Heartbeat(task_id=self.task.id, worker_id=self.worker_id,
                                                             attempt=self.task.attempt))
            except Exception as error:  # the queue restarting: the next beat may reach it
                log.warning("task %d: heartbeat failed: %s", self.task.id, error)
                continue
            if isinstance(reply, LeaseLost):
                self.cancel.cancel(LEASE_LOST)
                return
            if isinstance(reply, LeaseRenewed):
                self._renewed_at = time.monotonic()
            if isinstance(reply, LeaseRenewed) and reply.cancel_requested:
                self.cancel.cancel(CANCELLED_BY_OWNER)

    def _next_beat_s(self) -> float:
        if self.cancel.cancelled:  # nothing left to watch for but the lease and the wind-down's end
            return max(0.0, min(self._heartbeat_s, self._wound_down_by - time.monotonic()))
        return max(0.0, min(self._heartbeat_s, self._deadline - time.monotonic()))

    def _log(self, text: str) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as log_file:
            log_file.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text.rstrip()}\n")

    # -- the attempt ------------------------------------------------------------

    def run(self) -> None:
        stopped = threading.Event()
        beating = threading.Thread(target=self._heartbeats, args=(stopped,), name=f"heartbeat-task-{self.task.id}",
                                   daemon=True)
        beating.start()
        self._log(f"attempt {self.task.attempt} claimed by {self.worker_id}")
        try:
            ending = self._attempt()
        except _Stop as stop:
            log.info("task %d: attempt %d stops without finishing: %s", self.task.id, self.task.attempt, stop)
            self._log(f"attempt {self.task.attempt} stopped: {stop}")
            return
        finally:
            stopped.set()
        self._finish(ending)

    def _finish(self, ending: _Ending) -> None:
        worktree = str(self._tree.path) if self._tree is not None and ending.keep_worktree else ""
        self._log(f"attempt {self.task.attempt} ends {ending.outcome.value}: {ending.summary}")
        finish = Finish(
            task_id=self.task.id, worker_id=self.worker_id, attempt=self.task.attempt, outcome=ending.outcome,
            failure_class=ending.failure_class, summary=clip(ending.summary), review_id=ending.review_id,
            worktree=worktree, confined=self._confined, retry_after_s=ending.retry_after_s)
        reply = finish_with_retries(self.services.ask, finish, until=self._renewed_at + self._lease_ttl_s,
                                    wait=self._fence.wait)
        if isinstance(reply, LeaseLost):
            log.info("task %d: finish refused, the lease is lost: %s", self.task.id, reply.reason)

    def _attempt(self) -> _Ending:
        try:
            return self._steps()
        except _Stop:
            raise
        except RuntimeCancelled:
            return self._cancelled()
        except RuntimeAuthFailed as error:
            return _Ending(Outcome.FAILED, f"the runtime refused its credentials: {error}", FailureClass.AUTH)
        except RuntimeRateLimited as error:
            return _Ending(Outcome.FAILED, f"rate limited: {error}", FailureClass.TRANSIENT,
                           retry_after_s=error.retry_after_s)
        except RuntimeFailure as error:
            if self.cancel.cancelled:
                return self._cancelled()
            # Unavailable, timed out, malformed output or a failed call: the
            # runtime or its network, worth another attempt after a while.
            return _Ending(Outcome.FAILED, f"the runtime failed ({error.kind}): {error}", FailureClass.TRANSIENT)
        except (WorktreeError, RepoConfigError) as error:
            return _Ending(Outcome.FAILED, str(error), FailureClass.PERMANENT)
        except Exception as error:
            if self.cancel.cancelled:
                return self._cancelled()
            log.exception("task %d: attempt %d failed unexpectedly", self.task.id, self.task.attempt)
            failure_class, text = classify_unexpected(error)
            return _Ending(Outcome.FAILED, text, failure_class)

    def _cancelled(self) -> _Ending:
        reason = self.cancel.reason
        where = f"; its worktree is kept at {self._tree.path}" if self._tree is not None else ""
        if reason == CANCELLED_BY_OWNER:
            return _Ending(Outcome.CANCELLED, f"cancelled by the owner{where}")
        if reason == DEADLINE_EXCEEDED:
            return _Ending(Outcome.FAILED, f"deadline of {self.task.deadline_s} s exceeded in {self._phase.value}"
                                           f"{where}", FailureClass.PERMANENT)
        if reason == DAEMON_STOPPING:  # handed back: the next daemon runs it again
            return _Ending(Outcome.INTERRUPTED, f"interrupted in {self._phase.value}: {DAEMON_STOPPING}")
        raise _Stop(reason or "cancelled")

    def _steps(self) -> _Ending:
        task, settings = self.task, self.services.settings
        reviewed = self._earlier_review()
        if reviewed is not None and reviewed.state is ReviewState.CLOSED:
            return self._closed_by_owner(reviewed)
        if reviewed is not None:
            return self._already_handed_over(reviewed)
        named = task.repo or settings["tasks.default_repo"]
        if not named:
            return _Ending(Outcome.FAILED, "no repository: name one or set tasks.default_repo",
                           FailureClass.PERMANENT)
        self._report(Phase.WORKSPACE)
        tree = self._tree = worktrees.prepare(Path(named).expanduser(), self.services.home, task.id)
        runtime = self.services.runtime
        own_state = tuple(getattr(runtime, "own_state", ()))
        state = tuple(StateDir(path, own_state) for path in getattr(runtime, "state_dirs", ()))
        programs = tuple(getattr(runtime, "program_dirs", ()))
        try:
            with confinement(settings["tasks.confinement"], home=self.services.home, worktree=tree.path,
                             programs=programs, state=state, readable=(tree.objects,),
                             passthrough=settings["tasks.env_passthrough"]) as confined:
                return self._confined_work(tree, confined)
        except ConfinementUnavailable as refused:
            # Nothing ran in the worktree: it goes, and the task fails for
            # good (a retry would be refused the same way).
            self._report(Phase.WORKSPACE, summary=str(refused), confined=False)
            worktrees.remove(tree, self.services.home, delete_branch=True)
            self._tree = None
            return _Ending(Outcome.FAILED, str(refused), FailureClass.PERMANENT, keep_worktree=False)

    def _confined_work(self, tree: Worktree, confined: Confinement) -> _Ending:
        runtime = self.services.runtime
        # Confined means the runtime's commands too: a runtime that does
        # not start them under the prefix leaves the task unconfined
        # (its doctor still is).
        self._confined = confined.confined and bool(getattr(runtime, "confines_subprocesses", False))
        how = ("confined" if self._confined else
               f"doctor confined, the {runtime.name} runtime is not" if confined.confined
               else f"not confined: {confined.unconfined}")
        self._report(Phase.WORKSPACE, summary=f"worktree {tree.path} on {tree.branch} from {tree.base_branch} "
                                              f"at {tree.base[:12]} ({how})", worktree=str(tree.path),
                     confined=self._confined)
        return self._work(tree, confined)

    def _earlier_review(self) -> Review | None:
        """The review an earlier attempt of this task opened (the newest):
        that attempt died after opening it (before its Finish), so the work
        was done and is not done again, whatever the owner made of it since."""
        listed = self.services.ask("reviews", List(task_id=self.task.id, limit=1))
        return listed.reviews[0] if listed.reviews else None

    def _already_handed_over(self, review: Review) -> _Ending:
        review_id = str(review.id)
        self._report(Phase.REVIEW, event=EventKind.REVIEW_OPENED, review_id=review_id,
                     summary=f"review {review_id} is {review.state.value} already (an earlier attempt opened it): "
                             "the work is not redone")
        self._remove_leftover_worktree()
        return _Ending(Outcome.SUCCEEDED, f"review {review_id} was opened by an earlier attempt",
                       review_id=review_id, keep_worktree=False)

    def _closed_by_owner(self, review: Review) -> _Ending:
        """The owner closed the review an earlier attempt opened: the owner
        turned the work down, so the task ends as cancelled by its owner
        (terminal, never retried by itself; ``task retry`` makes a new one)."""
        self._remove_leftover_worktree()
        return _Ending(Outcome.CANCELLED, f"the owner closed review {review.id} (an earlier attempt opened it); "
                                          "the work is not redone", review_id=str(review.id), keep_worktree=False)

    def _remove_leftover_worktree(self) -> None:
        leftover = worktrees.info(self.services.home, self.task.id)
        if leftover is not None:  # the earlier attempt died before removing it; the branch holds the change
            worktrees.cleanup(self.services.home, leftover)

    def _invoke(self, tree: Worktree, confined: Confinement, prompt: str, owner_message: str) -> RuntimeResult:
        if self.cancel.cancelled:
            raise RuntimeCancelled(self.cancel.reason)
        remaining = self._deadline - time.monotonic()
        result = self.services.runtime.invoke(RuntimeRequest(
            session_key=f"task:{self.task.id}", prompt=prompt, native_session=self._native_session,
            owner_message=owner_message, sandbox="workspace-write", cwd=tree.path,
            timeout_s=max(1.0, min(float(self.services.settings["runtime.timeout_s"]), remaining)),
            cancel=self.cancel, purpose="task", confine=confined.prefix, private_state=confined.private_state,
            env=confined.env, writable=(task_git.own_git_dir(tree.path),)))
        self._native_session = result.native_session or self._native_session
        for item in result.progress:
            self._log(f"model: {item}")
        for command in result.commands:
            self._log(f"model ran {command.describe()}")
        self._log(f"model answered: {clip(result.text, 2_000)}")
        return result

    def _work(self, tree: Worktree, confined: Confinement) -> _Ending:
        task = self.task
        # Checked against the base as it is, never as the change has it.
        validation = Validation.against(
            tree.repo, tree.base, home=self.services.home, settings=self.services.settings,
            allow_paths=task.allow_paths, allow_fewer_tests=task.allow_fewer_tests)
        self._report(Phase.MODEL)
        answered = self._invoke(tree, confined, task_prompt(task, tree, validation), task.request)
        changed = worktrees.changed_paths(tree)
        if not changed and answered.commands and all(command.failed for command in answered.commands):
            return self._nothing_could_run(tree, answered.commands)
        if not changed:
            return self._no_changes(tree)
        self._report(Phase.VALIDATE, summary=f"{len(changed)} changed: {', '.join(changed)}")
        result = self._doctor(validation, tree, confined, changed)
        round_ = 0
        while not result.passed and not result.protected_changed and round_ < task.repairs:
            round_ += 1
            self._report(Phase.REPAIR, repair=round_, summary=f"repair {round_}/{task.repairs}: {result.summary}")
            self._invoke(tree, confined, repair_prompt(round_, task.repairs, result),
                         f"repair {round_}/{task.repairs}: {result.summary}")
            changed = worktrees.changed_paths(tree)
            if not changed:  # the repair undid the change: nothing is left to validate
                return self._no_changes(tree)
            result = self._doctor(validation, tree, confined, changed)
            if result.passed:
                self._report(Phase.REPAIR, repair=round_, event=EventKind.REPAIRED, summary=result.summary)
        if not result.passed:
            why = (f"validation failed after {round_} of {task.repairs} repairs: {result.summary}"
                   if not result.protected_changed else result.summary)
            return _Ending(Outcome.FAILED, f"{why}; the worktree is kept at {tree.path}", FailureClass.PERMANENT)
        if worktrees.content_of(tree, changed) != self._validated:
            # The test run itself rewrote what it validated: what would be
            # committed is not what passed.
            return _Ending(Outcome.FAILED, f"the test run changed the files it validated; the worktree is kept at "
                                           f"{tree.path}", FailureClass.PERMANENT)
        self._report(self._phase, event=EventKind.VALIDATED, repair=round_, summary=result.summary)
        return self._hand_over(tree, result, changed)

    def _nothing_could_run(self, tree: Worktree, commands: tuple[CommandRun, ...]) -> _Ending:
        """No change, and every command the model ran failed: the runtime
        could not work here (a sandbox helper missing, a tool that does not
        start), which "no changes" would hide."""
        self._no_changes(tree)
        failed = "; ".join(command.describe() for command in commands[:3])
        more = f" and {len(commands) - 3} more" if len(commands) > 3 else ""
        return _Ending(Outcome.FAILED, f"no changes, and every command the {self.services.runtime.name} runtime "
                                       f"ran failed ({len(commands)}): {failed}{more}", FailureClass.PERMANENT,
                       keep_worktree=False)

    def _no_changes(self, tree: Worktree) -> _Ending:
        worktrees.remove(tree, self.services.home, delete_branch=True)
        self._tree = None
        return _Ending(Outcome.SUCCEEDED, "no changes", keep_worktree=False)

    def _doctor(self, validation: Validation, tree: Worktree, confined: Confinement,
                changed: list[str]) -> doctor.DoctorResult:
        self._validated = worktrees.content_of(tree, changed)
        return validation.check(tree.path, log_path=self.log_path, cancel=self.cancel, confine=confined,
                                      changed=changed)

    def _hand_over(self, tree: Worktree, result: doctor.DoctorResult, validated: list[str]) -> _Ending:
        self._report(Phase.CAPTURE)
        head = worktrees.capture(tree, self.task.request, validated)
        stat = worktrees.diffstat(tree, head)
        self._report(Phase.CAPTURE, event=EventKind.CAPTURED, summary=f"{head[:12]} on {tree.branch}")
        self._report(Phase.REVIEW)
        opened = self.services.ask("reviews", Open(
            task_id=self.task.id, repo=str(tree.repo), branch=tree.branch, base=tree.base, head=head,
            diffstat=stat, doctor_summary=result.summary))
        if isinstance(opened, Rejected):
            return _Ending(Outcome.FAILED, f"the review was refused: {opened.reason}", FailureClass.PERMANENT)
        review_id = str(opened.review_id)
        self._report(Phase.REVIEW, event=EventKind.REVIEW_OPENED, review_id=review_id,
                     summary=f"review {review_id}: {stat.splitlines()[-1].strip() if stat else head[:12]}")
        # The branch holds the change; the worktree is not needed any more.
        worktrees.remove(tree, self.services.home, delete_branch=False)
        return _Ending(Outcome.SUCCEEDED, f"review {review_id} opened: {result.summary}", review_id=review_id,
                       keep_worktree=False)


def classify_unexpected(error: BaseException) -> tuple[FailureClass, str]:
    """An error no step expected (a bug, a full disk): a full disk or a lost
    actor may pass, anything else would fail again."""
    transient = isinstance(error, OSError | ActorUnavailable)
    return (FailureClass.TRANSIENT if transient else FailureClass.PERMANENT), f"{type(error).__name__}: {error}"

