"""A task attempt on another machine, speaking the local worker's protocol
through the daemon; free of Ray (``enact.tasks.ray_backend`` runs it there).

The node runs the very ``TaskAttempt`` a local worker runs, with two
things swapped: the repository it works on is a clone of the base bundle
the daemon sent (``enact.tasks.ray_bundles``), and its ``ask`` is a
``NodeAsker``, which hands every message to the daemon's mailbox
(``enact.tasks.remote_mailbox``, under the attempt's own key) and waits for
the daemon's answer. On the daemon, a ``Relay`` takes each message of the
attempt from the mailbox and asks the queue or the reviews with it as the local worker
would, after checking it is this attempt's (task, worker, attempt): the
claim, the lease, the heartbeats, the phases and the Finish stay the
queue's, judged by its rules. So a node that dies, or a worker process that
is killed, sends no more heartbeats, and its lease expires as a local
worker's does.

Two messages change on the way. A review's ``Open`` goes with the change
bundle, which the daemon checks and fetches onto the task's branch in the
owner's repository before it opens the review itself (``ChangeForReview``).
The node's worktree paths name nothing on the daemon's machine, so a phase
or a Finish does not record them. The node's task log comes along with each
message and is appended to the daemon's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from enact.actors._asks import ActorUnavailable, Asker
from enact.cancellation import CancellationToken
from enact.config import Config, RuntimeSettings
from enact.frozen_dataclass import dataclass
from enact.messages.common import RefusalCode, Refused
from enact.messages.reviews import List as ListReviews
from enact.messages.reviews import Open
from enact.messages.tasks import Claimed, Finish, Heartbeat, ReportPhase
from enact.messages.workers import RemoteWorker
from enact.runtime import (
    Runtime,
    RuntimeFailure,
    RuntimeOverBudget,
    RuntimeRequest,
    RuntimeResult,
    RuntimeWrapper,
    Usage,
)
from enact.runtime.metered import MeteredRuntime
from enact.tasks.host_git import WorktreeError
from enact.tasks.ray_bundles import BaseBundle, BundleRefused, bundle_change, clone_base, take_change
from enact.tasks.records import task_log_path
from enact.tasks.remote_mailbox import ANSWER_WAIT_S, Answer, Envelope
from enact.tasks.settings import TasksSettings
from enact.tasks.validation import Validation
from enact.tasks.worker import TaskAttempt, WorkerServices

log = logging.getLogger(__name__)

_LOG_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeForReview:
    """A review's ``Open`` from the node, with the change it names."""

    open: Open
    bundle: bytes | None


_remote_workers: dict[str, RemoteWorker] = {}
_remote_workers_lock = threading.Lock()


def note_remote_worker(worker: RemoteWorker | None, worker_id: str) -> None:
    """Record where a worker's remote attempt runs (None: it ended), for ``workers.RemoteWorkers``."""
    with _remote_workers_lock:
        if worker is None:
            _remote_workers.pop(worker_id, None)
        else:
            _remote_workers[worker_id] = worker


def remote_workers() -> tuple[RemoteWorker, ...]:
    with _remote_workers_lock:
        return tuple(sorted(_remote_workers.values(), key=lambda item: item.worker_id))


METER = "meter"
"""Where a node's runtime calls are admitted and counted: the daemon's
metered runtime (``enact.runtime.metered``), so the day's budget holds for
them too."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterCall:
    """Before a call on the node (``outcome`` ""): may it be made, answered
    None or (kind, why not); after it: what it spent."""

    purpose: str
    sandbox: str = ""
    spends_over_budget: bool = False
    outcome: str = ""
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0


class MeteredOnTheDaemon(RuntimeWrapper):
    """The node's runtime, each call admitted and counted by the daemon."""

    def __init__(self, runtime: Runtime, ask: Callable[[str, Any], Any]) -> None:
        super().__init__(runtime)
        self._ask = ask

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        refused = self._ask(METER, MeterCall(purpose=request.purpose, sandbox=request.sandbox,
                                             spends_over_budget=request.spends_over_budget))
        if refused is not None:
            kind, why = refused
            raise RuntimeOverBudget(why) if kind == RuntimeOverBudget.kind else RuntimeFailure(why)
        started = time.monotonic()
        try:
            result = self.runtime.invoke(request)
        except RuntimeFailure as failure:
            self._counted(request, failure.kind, failure.usage, started)
            raise
        except Exception:
            self._counted(request, "failed", Usage(), started)
            raise
        self._counted(request, "ok", result.usage, started)
        return result

    def _counted(self, request: RuntimeRequest, outcome: str, usage: Usage, started: float) -> None:
        try:
            self._ask(METER, MeterCall(purpose=request.purpose, outcome=outcome, usage=usage,
                                       duration_s=time.monotonic() - started))
        except ActorUnavailable as error:  # bookkeeping: the call's outcome stands
            log.warning("a call on this node was not counted by the daemon: %s", error)


class NodeAsker:
    """The node's ``ask``: each message goes to the daemon through ``post``
    (``remote_mailbox.Mailbox.ask``), with the task log written since."""

    def __init__(self, post: Callable[[Envelope], Answer | None], *, key: str, log_path: Path,
                 cancel: CancellationToken) -> None:
        self._post = post
        self._key = key
        self._log_path = log_path
        self._cancel = cancel
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._log_sent = 0

    def _log_since(self) -> bytes:
        try:
            with open(self._log_path, "rb") as file:
                file.seek(self._log_sent)
                new = file.read(_LOG_CHUNK)
        except FileNotFoundError:
            return b""
        self._log_sent += len(new)
        return new

    def __call__(self, target: str, message: Any) -> Any:
        if isinstance(message, Open):
            message = ChangeForReview(open=message, bundle=bundle_change(Path(message.repo), message.branch,
                                                                          message.base))
        with self._lock:
            envelope = Envelope(key=self._key, seq=next(self._numbers), target=target, message=message,
                                log=self._log_since())
        answer = self._post(envelope)
        if answer is None:
            raise ActorUnavailable(f"the daemon did not answer {type(message).__name__} within {ANSWER_WAIT_S:g} s")
        if answer.cancel:
            self._cancel.cancel(answer.cancel)
        if answer.unavailable:
            raise ActorUnavailable(answer.unavailable)
        return answer.reply


def _node_root(config: Config) -> Path:
    """This machine's directory for one daemon home's attempts, this user's
    own (``$TMPDIR/enact-node-<uid>/<home>``): a directory someone else made
    there, or a link, is refused."""
    root = node_root(config.home)
    top = root.parent
    top.mkdir(mode=0o700, exist_ok=True)
    info = top.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise WorktreeError(f"{top} is not a private directory of this user's: remove it")
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def node_root(home: Path) -> Path:
    """Where this machine keeps the attempts of the daemon on ``home``."""
    named = hashlib.sha256(str(home).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"enact-node-{os.getuid()}" / named


def _emptied(work: Path, *, keep: Path) -> None:
    """Remove everything under ``work`` but ``keep`` (and the directories that lead to it)."""
    if not work.is_dir():
        return
    for entry in work.iterdir():
        if entry == keep:
            continue
        if keep.is_relative_to(entry) and entry.is_dir() and not entry.is_symlink():
            _emptied(entry, keep=keep)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def run_on_node(claimed: Claimed, *, key: str, worker_id: str, config: Config, base: BaseBundle,
                post: Callable[[Envelope], Answer | None]) -> None:
    """The attempt on this machine, in a directory of the worker's it
    empties first and after: a home of its own, the base's clone, the
    runtime ``config`` names (its CLIs and credentials are this machine's).
    The clone's path is the worker's, the same each attempt, and the home's
    ``doctor-baselines`` is kept: the worker measures what the doctor
    finds on a base once, not again for each attempt."""
    from enact import components
    from enact.tasks.confined_calls import build_runtime
    from enact.tasks.validation import BASELINES_DIR

    work = _node_root(config) / re.sub(r"[^A-Za-z0-9_.-]", "-", worker_id)
    home = work / "home"
    kept = home / BASELINES_DIR
    _emptied(work, keep=kept)  # what an attempt of this worker killed before its end left
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        repo = clone_base(base, work / "repo")
        cancel = CancellationToken()
        ask = NodeAsker(post, key=key, log_path=task_log_path(home, claimed.task.id), cancel=cancel)
        runtime = MeteredOnTheDaemon(build_runtime(components.load(), config), ask)
        services = WorkerServices(home=home, settings=config.typed(TasksSettings),
                                  call_timeout_s=config.typed(RuntimeSettings).timeout_s, runtime=runtime, ask=ask)
        here = dataclasses.replace(claimed, task=dataclasses.replace(claimed.task, repo=str(repo)))
        TaskAttempt(here, worker_id=worker_id, services=services, parent=cancel, fence=CancellationToken()).run()
    finally:
        _emptied(work, keep=kept)


class Relay:
    """The daemon's side of one remote attempt: each envelope becomes the
    ask a local worker would have made, if it is this attempt's."""

    def __init__(self, claimed: Claimed, *, worker_id: str, home: Path, settings: TasksSettings, ask: Asker,
                 repo: Path, base: str, may_write: Callable[[], bool], meter: Runtime | None = None) -> None:
        """``may_write``: whether this daemon still owns its home (the
        fence); a fenced daemon puts no change in the owner's repository.
        ``meter``: the daemon's runtime, which admits and counts the
        node's calls when it is the metered one."""
        self._meter = meter if isinstance(meter, MeteredRuntime) else None
        self.task = claimed.task
        self._worker_id = worker_id
        self._home = home
        self._settings = settings
        self._ask = ask
        self._repo = repo
        self._base = base
        self._may_write = may_write
        self.heard = False
        """Whether the node has sent anything yet (it started the attempt)."""

    def handle(self, envelope: Envelope, *, cancel: str = "") -> Answer:
        self.heard = True
        if envelope.log:
            path = task_log_path(self._home, self.task.id)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as file:
                file.write(envelope.log)
        try:
            reply = self._forward(envelope.target, envelope.message)
        except Exception as error:  # fenced, a git failure...: the node's ask fails, as an unavailable actor's
            if not isinstance(error, ActorUnavailable):
                log.warning("task %d: %s from the node failed: %s", self.task.id, type(envelope.message).__name__,
                            error)
            return Answer(unavailable=str(error) or type(error).__name__, cancel=cancel)
        return Answer(reply=reply, cancel=cancel)

    def _ours(self, message: Any) -> bool:
        return (getattr(message, "task_id", None) == self.task.id and getattr(message, "worker_id", None) ==
                self._worker_id and getattr(message, "attempt", None) == self.task.attempt)

    def _forward(self, target: str, message: Any) -> Any:
        if target == "tasks" and isinstance(message, Heartbeat) and self._ours(message):
            return self._ask("tasks", message)
        if target == "tasks" and isinstance(message, ReportPhase | Finish) and self._ours(message):
            # The node's worktree is nothing on this machine to point at.
            return self._ask("tasks", dataclasses.replace(message, worktree=""))
        if target == "reviews" and isinstance(message, ListReviews) and message.task_id == self.task.id:
            return self._ask("reviews", message)
        if target == "reviews" and isinstance(message, ChangeForReview) and message.open.task_id == self.task.id:
            return self._open(message)
        if target == METER and isinstance(message, MeterCall):
            return self._metered(message)
        if target == "skills":  # placing them would write this machine's paths the node names
            raise ActorUnavailable("skills are not placed in a remote worktree")
        raise ActorUnavailable(f"a remote attempt of task {self.task.id} may not send {type(message).__name__} "
                               f"to {target}")

    def _metered(self, call: MeterCall) -> tuple[str, str] | None:
        if self._meter is None:
            return None
        if call.outcome:
            self._meter.counted(purpose=call.purpose, outcome=call.outcome, usage=call.usage,
                                duration_s=call.duration_s)
            return None
        try:
            self._meter.admit(purpose=call.purpose, sandbox=call.sandbox, spends_over_budget=call.spends_over_budget)
        except RuntimeFailure as refused:
            return refused.kind, str(refused)
        return None

    def _open(self, change: ChangeForReview) -> Any:
        if change.bundle is None:
            return Refused(reason="the node sent no change to review", code=RefusalCode.INVALID)
        if not self._may_write():
            raise ActorUnavailable("this daemon was taken over (fenced): it takes no change")
        validation = Validation.against(self._repo, self._base, home=self._home, settings=self._settings,
                                        allow_paths=self.task.allow_paths)
        try:
            taken = take_change(change.bundle, home=self._home, task_id=self.task.id, repo=self._repo,
                                base=self._base, guards=validation.guards, scratch=self._home / "bundles",
                                head=change.open.head)
        except BundleRefused as refused:
            log.warning("task %d: the change bundle from the node is refused: %s", self.task.id, refused)
            return Refused(reason=str(refused), code=RefusalCode.INVALID)
        return self._ask("reviews", dataclasses.replace(
            change.open, repo=str(self._repo), branch=taken.branch, base=self._base, head=taken.head,
            diffstat=taken.diffstat))
