"""The tasks component: the queue, the worker pool, reviews and the
scheduler (cron and backlog); their chat commands and ``enact task``,
``review``, ``cron``, ``backlog`` and ``worktree``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.components import Component, DaemonParts
from enact.tasks import settings as tasks_settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry
    from enact.config import Config


class TasksComponent(Component):
    name = "tasks"
    sections = ("tasks", "scheduler")
    settings = tasks_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {
        "task": "enact.cli._tasks:task",
        "review": "enact.cli._reviews:review",
        "cron": "enact.cli._schedule:cron",
        "backlog": "enact.cli._schedule:backlog",
        "worktree": "enact.cli._worktrees:worktree",
    }

    def validate_environment(self, settings: Config) -> None:
        """The Ray backend needs Ray installed (``enact[ray]``), resources of
        the form NAME=AMOUNT and, when it names a running cluster, a cluster
        that takes this daemon as a driver (its address, its token): the
        start is refused in one line otherwise, before the home is touched."""
        import importlib.util

        from enact.components import ComponentError
        from enact.tasks.settings import TasksSettings, resource_amounts

        own = settings.typed(TasksSettings)
        if own.backend != "ray":
            return
        if importlib.util.find_spec("ray") is None:
            raise ComponentError("tasks.backend is ray, but Ray is not installed: pip install 'enact[ray]'")
        if resource_amounts(own.ray_resources) is None:
            raise ComponentError(f"tasks.ray.resources ({settings.sources.get('tasks.ray.resources', 'default')}): "
                                 f"each entry must be NAME=AMOUNT, the amount above 0, not {list(own.ray_resources)}")
        if own.ray_address == "local":
            return  # the first attempt starts it
        from enact.tasks.ray_backend import ClusterUnavailable, connect_at_start  # imports Ray: only here

        try:
            connect_at_start(own)
        except ClusterUnavailable as error:
            raise ComponentError(str(error)) from None

    def metrics(self, registry: CollectorRegistry) -> None:
        from enact.metrics import feature_metrics
        from enact.tasks.metrics import TasksMetrics

        feature_metrics(registry, TasksMetrics)

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.messages.tasks import TaskChanged
        from enact.tasks import queue_actor, reviews_actor, scheduler_actor, workers_actor

        return [
            ActorSpec(name="tasks", actor=queue_actor.TaskQueueActor, databases=queue_actor.DATABASES,
                      depends_on=("epoch", "inbox"),  # it tells the inbox its owner notices, at start too
                      options={"agentic": parts.runtime.capabilities.agentic}),
            ActorSpec(name="reviews", actor=reviews_actor.ReviewsActor, databases=reviews_actor.DATABASES,
                      depends_on=("epoch",)),
            ActorSpec(name="scheduler", actor=scheduler_actor.SchedulerActor, databases=scheduler_actor.DATABASES,
                      depends_on=("epoch", "tasks", "budget"), options={"budget": parts.budget}),
            # After the budget actor, which fills the gate every runtime call reads.
            ActorSpec(name="workers", actor=workers_actor.WorkersActor,
                      depends_on=("epoch", "tasks", "reviews", "budget"),
                      options={"runtime": parts.runtime}, subscribes=(TaskChanged,),
                      pools=(workers_actor.FAMILY,)),
        ]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.tasks.backlog_commands import backlog_commands
        from enact.tasks.from_chat import task_commands
        from enact.tasks.review_commands import review_commands

        return [*task_commands(), *review_commands(), *backlog_commands()]
