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
(the next heartbeat says ``cancel_requested``), the deadline, the daemon
stopping gracefully, a lost lease or a fence. What each ending is worth to
the queue is ``enact.tasks.endings``'; what the model is told,
``enact.tasks.prompts``'.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from enact.actors._asks import Asker
from enact.cancellation import CancellationToken
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.messages.common import Refused
from enact.messages.reviews import List, Open, Review, ReviewState
from enact.messages.tasks import Claimed, Finish, Heartbeat, LeaseLost, LeaseRenewed, ReportPhase
from enact.runtime import (
    Runtime,
    RuntimeAuthFailed,
    RuntimeCancelled,
    RuntimeFailure,
    RuntimeRateLimited,
    RuntimeRequest,
    RuntimeResult,
    RuntimeTimeout,
)
from enact.runtime._subprocess import TERM_GRACE_S
from enact.tasks import doctor, endings, task_git, worktrees
from enact.tasks.confine import Confinement, ConfinementUnavailable, StateDir, confinement
from enact.tasks.endings import CANCELLED_BY_OWNER, DEADLINE_EXCEEDED, LEASE_LOST, Ending
from enact.tasks.finishing import finish_with_retries
from enact.tasks.host_git import WorktreeError
from enact.tasks.prompts import repair_prompt, task_prompt
from enact.tasks.records import EventKind, FailureClass, Outcome, Phase, clip, task_log_path
from enact.tasks.repo_config import RepoConfigError
from enact.tasks.settings import TasksSettings
from enact.tasks.task_skills import TaskSkills
from enact.tasks.validation import Validation
from enact.tasks.worktrees import Worktree

log = logging.getLogger(__name__)


_HEARTBEAT_MAX_S = 1.0
"""Heartbeats come at least this often, so a cancel is seen within about a second."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerServices:
    home: Path
    settings: TasksSettings
    call_timeout_s: float
    """The longest one runtime call may take (``runtime.timeout_s``)."""
    runtime: Runtime
    ask: Asker


class _Stop(EnactError):
    """The attempt ends without a Finish from this worker (lease lost, fenced)."""


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

    def _finish(self, ending: Ending) -> None:
        worktree = str(self._tree.path) if self._tree is not None and ending.keep_worktree else ""
        self._log(f"attempt {self.task.attempt} ends {ending.outcome.value}: {ending.summary}")
        finish = Finish(
            task_id=self.task.id, worker_id=self.worker_id, attempt=self.task.attempt, outcome=ending.outcome,
            failure_class=ending.failure_class, summary=clip(ending.summary), review_id=ending.review_id,
            worktree=worktree, confined=self._confined, retry_after_s=ending.retry_after_s,
            experience=ending.experience)
        reply = finish_with_retries(self.services.ask, finish, until=self._renewed_at + self._lease_ttl_s,
                                    wait=self._fence.wait)
        if isinstance(reply, LeaseLost):
            log.info("task %d: finish refused, the lease is lost: %s", self.task.id, reply.reason)

    def _attempt(self) -> Ending:
        try:
            return self._steps()
        except _Stop:
            raise
        except RuntimeCancelled:
            return self._cancelled()
        except (RuntimeAuthFailed, RuntimeRateLimited) as error:
            return endings.runtime_failed(error)
        except RuntimeFailure as error:
            return self._cancelled() if self.cancel.cancelled else endings.runtime_failed(error)
        except (WorktreeError, RepoConfigError) as error:
            return Ending(Outcome.FAILED, str(error), FailureClass.PERMANENT)
        except Exception as error:
            if self.cancel.cancelled:
                return self._cancelled()
            log.exception("task %d: attempt %d failed unexpectedly", self.task.id, self.task.attempt)
            return endings.unexpected(error)

    def _cancelled(self) -> Ending:
        reason = self.cancel.reason
        ending = endings.cancelled(reason, phase=self._phase, deadline_s=self.task.deadline_s,
                                   kept_at=self._tree.path if self._tree is not None else None)
        if ending is None:
            raise _Stop(reason or "cancelled")
        return ending

    def _steps(self) -> Ending:
        task, settings = self.task, self.services.settings
        reviewed = self._earlier_review()
        if reviewed is not None:
            return self._handed_over_before(reviewed)
        named = task.repo or settings.default_repo
        if not named:
            return Ending(Outcome.FAILED, "no repository: name one or set tasks.default_repo",
                          FailureClass.PERMANENT)
        self._report(Phase.WORKSPACE)
        tree = self._tree = worktrees.prepare(Path(named).expanduser(), self.services.home, task.id)
        capabilities = self.services.runtime.capabilities
        state = tuple(StateDir(path, capabilities.own_state) for path in capabilities.state_dirs)
        programs = capabilities.program_dirs
        try:
            with confinement(settings.confinement, home=self.services.home, worktree=tree.path,
                             programs=programs, state=state, readable=(tree.objects,),
                             passthrough=settings.env_passthrough) as confined:
                return self._confined_work(tree, confined)
        except ConfinementUnavailable as refused:
            # Nothing ran in the worktree: it goes, and the task fails for
            # good (a retry would be refused the same way).
            self._report(Phase.WORKSPACE, summary=str(refused), confined=False)
            worktrees.remove(tree, self.services.home, delete_branch=True)
            self._tree = None
            return Ending(Outcome.FAILED, str(refused), FailureClass.PERMANENT, keep_worktree=False)

    def _confined_work(self, tree: Worktree, confined: Confinement) -> Ending:
        runtime = self.services.runtime
        # Confined means the runtime's commands too: a runtime that does
        # not start them under the prefix leaves the task unconfined
        # (its doctor still is).
        self._confined = confined.confined and runtime.capabilities.confines_subprocesses
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

    def _handed_over_before(self, review: Review) -> Ending:
        if review.state is not ReviewState.CLOSED:
            self._report(Phase.REVIEW, event=EventKind.REVIEW_OPENED, review_id=str(review.id),
                         summary=f"review {review.id} is {review.state.value} already (an earlier attempt opened "
                                 "it): the work is not redone")
        leftover = worktrees.info(self.services.home, self.task.id)
        if leftover is not None:  # the earlier attempt died before removing it; the branch holds the change
            worktrees.cleanup(self.services.home, leftover)
        return endings.handed_over_before(review)

    def _invoke(self, tree: Worktree, confined: Confinement, prompt: str, owner_message: str) -> RuntimeResult:
        if self.cancel.cancelled:
            raise RuntimeCancelled(self.cancel.reason)
        remaining = self._deadline - time.monotonic()
        skills = TaskSkills(self.services.ask, task_id=self.task.id, note=self._log,
                            under=self.services.runtime.capabilities.native_skills)
        placed = skills.place(tree.path)
        try:
            result = self.services.runtime.invoke(RuntimeRequest(
                session_key=f"task:{self.task.id}", prompt=prompt, native_session=self._native_session,
                owner_message=owner_message, sandbox="workspace-write", cwd=tree.path,
                timeout_s=max(1.0, min(self.services.call_timeout_s, remaining)),
                cancel=self.cancel, purpose="task", confine=confined.prefix, private_state=confined.private_state,
                env=confined.env, writable=(task_git.own_git_dir(tree.path),)))
        except RuntimeTimeout:
            if time.monotonic() < self._deadline:
                raise  # the call's own limit (runtime.timeout_s): a failure a retry may get past
            # The call was given what was left of the task's time, so its
            # time-out is the deadline, whether it or the heartbeat noticed first.
            self.cancel.cancel(DEADLINE_EXCEEDED)  # a token keeps its first reason
            raise RuntimeCancelled(self.cancel.reason) from None
        finally:
            skills.withdraw(tree.path, placed)
        self._native_session = result.native_session or self._native_session
        skills.used(result.skills_used)
        for item in result.progress:
            self._log(f"model: {item}")
        for command in result.commands:
            self._log(f"model ran {command.describe()}")
        self._log(f"model answered: {clip(result.text, 2_000)}")
        return result

    def _work(self, tree: Worktree, confined: Confinement) -> Ending:
        task = self.task
        # Checked against the base as it is, never as the change has it.
        validation = Validation.against(
            tree.repo, tree.base, home=self.services.home, settings=self.services.settings,
            allow_paths=task.allow_paths, allow_fewer_tests=task.allow_fewer_tests)
        self._report(Phase.MODEL)
        answered = self._invoke(tree, confined, task_prompt(task, tree, validation), task.request)
        changed = worktrees.changed_paths(tree)
        if not changed and answered.commands and all(command.failed for command in answered.commands):
            self._no_changes(tree)
            return endings.nothing_could_run(self.services.runtime.name, answered.commands)
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
            return endings.validation_failed(result, repaired=round_, repairs=task.repairs, kept_at=tree.path)
        if worktrees.content_of(tree, changed) != self._validated:
            return endings.rewritten_by_tests(tree.path)
        self._report(self._phase, event=EventKind.VALIDATED, repair=round_, summary=result.summary)
        return self._hand_over(tree, result, changed, repairs=round_)

    def _no_changes(self, tree: Worktree) -> Ending:
        worktrees.remove(tree, self.services.home, delete_branch=True)
        self._tree = None
        return Ending(Outcome.SUCCEEDED, "no changes", keep_worktree=False)

    def _doctor(self, validation: Validation, tree: Worktree, confined: Confinement,
                changed: list[str]) -> doctor.DoctorResult:
        self._validated = worktrees.content_of(tree, changed)
        return validation.check(tree.path, log_path=self.log_path, cancel=self.cancel, confine=confined,
                                      changed=changed)

    def _hand_over(self, tree: Worktree, result: doctor.DoctorResult, validated: list[str], *,
                   repairs: int) -> Ending:
        self._report(Phase.CAPTURE)
        head = worktrees.capture(tree, self.task.request, validated)
        stat = worktrees.diffstat(tree, head)
        self._report(Phase.CAPTURE, event=EventKind.CAPTURED, summary=f"{head[:12]} on {tree.branch}")
        self._report(Phase.REVIEW)
        opened = self.services.ask("reviews", Open(
            task_id=self.task.id, repo=str(tree.repo), branch=tree.branch, base=tree.base, head=head,
            diffstat=stat, doctor_summary=result.summary))
        if isinstance(opened, Refused):
            return Ending(Outcome.FAILED, f"the review was refused: {opened.reason}", FailureClass.PERMANENT)
        review_id = str(opened.review_id)
        self._report(Phase.REVIEW, event=EventKind.REVIEW_OPENED, review_id=review_id,
                     summary=f"review {review_id}: {stat.splitlines()[-1].strip() if stat else head[:12]}")
        # The branch holds the change; the worktree is not needed any more.
        worktrees.remove(tree, self.services.home, delete_branch=False)
        return Ending(Outcome.SUCCEEDED, result.summary, review_id=review_id, keep_worktree=False,
                      experience=endings.experience_of(validated, stat, result, repairs=repairs))

