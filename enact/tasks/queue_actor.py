"""The task queue actor: a thin front over ``enact.tasks.queue``.

It answers owners and workers, expires leases on its own timer, publishes
``tasks.TaskChanged`` after each committed change, and tells the inbox the
outcome of a task that came from chat (a notice on its conversation), again
at start and on the lease sweep's timer for each notice the inbox has not
said it took. It never waits on another actor: workers do the long work and
only send it messages."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from enact.actors._base import STARTED, ActorContext, EnactActor
from enact.config import RuntimeSettings
from enact.messages.common import RefusalCode, Refused, is_human
from enact.messages.inbox import NoticeTaken
from enact.messages.tasks import (
    Cancel,
    ChangedSince,
    Claim,
    Events,
    ExpireLeases,
    Finish,
    Found,
    Get,
    GetByKey,
    Heartbeat,
    Leases,
    List,
    ReportPhase,
    Resume,
    ResumeAfterBudget,
    Resumed,
    Retry,
    Submit,
)
from enact.tasks.metrics import TasksMetrics
from enact.tasks.queue import TaskQueue
from enact.tasks.records import Task
from enact.tasks.repositories import usable
from enact.tasks.settings import TasksSettings
from enact.tasks.tables import DATABASES

__all__ = ["DATABASES", "TaskQueueActor"]

INBOX = "inbox"
log = logging.getLogger(__name__)
_SWEEPS_PER_TTL = 4
"""Leases are checked this many times per TTL: one expires at most a quarter
of its TTL late."""


class TaskQueueActor(EnactActor):
    """Owns ``tasks.queue``, ``tasks.events``, ``tasks.index`` and ``tasks.notices``.

    ``agentic``: whether the selected runtime can edit a worktree; with a
    chat-only runtime every submission is refused."""

    def __init__(self, context: ActorContext, *, agentic: bool = True) -> None:
        super().__init__(context)
        settings = context.config.typed(TasksSettings)
        self._lease_ttl_s = settings.lease_ttl_s
        self.queue = TaskQueue(context.own_store(), default_repo=settings.default_repo,
                               lease_ttl_s=self._lease_ttl_s)
        self._agentic = agentic
        self._runtime = context.config.typed(RuntimeSettings).adapter

    def on_receive(self, message: Any) -> Any:
        if message is STARTED:
            # A sweep at once, which also tells the inbox every held notice
            # (it was never told, or never said it took them). Here, not in
            # on_start: the supervisor asks this once it can address this
            # actor by name, which the inbox's answer (NoticeTaken) needs;
            # told before, the answer could find no one and wait a lease TTL.
            self.actor_ref.tell(ExpireLeases())
            self._count_states()
        return super().on_receive(message)

    def on_stop(self) -> None:
        self.cancel_timers()
        super().on_stop()

    def _sweep_later(self) -> None:
        self.tell_later(self._lease_ttl_s / _SWEEPS_PER_TTL, ExpireLeases())

    def handle(self, message: Any) -> Any:
        now = self.context.clock.time()
        try:
            return self._handle(message, now)
        finally:
            self._publish()

    def _publish(self) -> None:
        changes = self.queue.take_changes()
        for change in changes:
            self.context.metrics.of(TasksMetrics).task_events.labels(event=change.event.event.kind.value).inc()
            self.context.publish(change)
        if changes:
            self._count_states()
        for notice in self.queue.notices.take():
            self.context.tell(INBOX, notice)

    def _count_states(self) -> None:
        metrics = self.context.metrics.of(TasksMetrics)
        for state, count in self.queue.counts(metrics.COUNTED_STATES).items():
            metrics.tasks.labels(state=state.value).set(count)

    def _repo_checked(self, message: Submit) -> Submit | Refused:
        """``message`` naming its repository's top level, or why no task can
        work there (``enact.tasks.repositories``; here, not in the queue's
        rules, because the check runs git). A key already used finds its
        task, whatever became of the repository since."""
        if message.idempotency_key and isinstance(self.queue.by_key(message.idempotency_key), Found):
            return message
        named = message.repo or self.queue.default_repo
        if not named:
            return message  # the queue says so, in its asker's words
        repo = usable(named)
        return repo if isinstance(repo, Refused) else dataclasses.replace(message, repo=repo)

    def _handle(self, message: Any, now: float) -> Any:
        queue = self.queue
        match message:
            case Submit():
                if not self._agentic:
                    return Refused(reason=f"the runtime {self._runtime!r} cannot work in a repository (it is not "
                                          "agentic); select an agentic runtime such as codex or claude for tasks",
                                   code=RefusalCode.UNSUPPORTED)
                checked = self._repo_checked(message)
                return checked if isinstance(checked, Refused) else queue.submit(checked, now)
            case Claim():
                return queue.claim(message.worker_id, now)
            case Heartbeat():
                return queue.heartbeat(message.task_id, message.worker_id, message.attempt, now)
            case ReportPhase():
                return queue.report_phase(message, now)
            case Finish():
                return queue.finish(message, now)
            case Cancel() | Retry() | Resume() if not is_human(message.origin):
                return Refused(reason=f"{type(message).__name__.lower()} needs the owner (origin "
                                      f"{message.origin!r} is not a person)", code=RefusalCode.NOT_HUMAN)
            case Cancel():
                return queue.cancel(message.task_id, now)
            case Retry():
                return queue.retry(message.task_id, message.origin, now)
            case Resume():
                resumed = queue.resume(message.task_id, now)
                return Resumed(task=resumed) if isinstance(resumed, Task) else resumed
            case ResumeAfterBudget():
                queued_again = queue.resume_after_budget(now)
                if queued_again:
                    log.info("tasks %s resumed: the task budget's day started again", queued_again)
                return None
            case Get():
                return queue.get(message.task_id)
            case GetByKey():
                return queue.by_key(message.idempotency_key)
            case List():
                return queue.list(message.state, message.limit, message.before)
            case Events():
                return queue.events(message.task_id, message.cursor, message.limit)
            case Leases():
                return queue.leases()
            case ChangedSince():
                return queue.changed_since(message.after, message.limit)
            case NoticeTaken():
                queue.notices.taken(message.notice_id)
                return None
            case ExpireLeases():
                try:
                    queue.expire_leases(now)
                    queue.notices.retell(now)
                finally:
                    self._sweep_later()
                return None
        return super().handle(message)
