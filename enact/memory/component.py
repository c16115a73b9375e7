"""The memory component: the memory actor (facts, their index, identities,
forgetting), its chat commands, ``enact memory`` and ``enact identity``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.components import Component, DaemonParts
from enact.memory import settings as memory_settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry


class MemoryComponent(Component):
    name = "memory"
    settings = memory_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {
        "memory": "enact.cli._memory:memory", "identity": "enact.cli._identity:identity",
    }

    def metrics(self, registry: CollectorRegistry) -> None:
        from enact.memory.metrics import MemoryMetrics
        from enact.metrics import feature_metrics

        feature_metrics(registry, MemoryMetrics)

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.memory import memory_actor

        return [ActorSpec(name="memory", actor=memory_actor.MemoryActor, databases=memory_actor.DATABASES,
                          depends_on=("epoch",))]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.memory.commands import memory_commands

        return memory_commands()
