"""The evolution component: the evidence scanner, the curator (signals,
candidates, proposals, the evolve mode) and the scheduled evolve run; their chat commands and ``enact
evolve``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.components import Component, DaemonParts
from enact.evolution import settings as evolution_settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry


class EvolutionComponent(Component):
    name = "evolution"
    sections = ("evolve", "lineage")
    settings = evolution_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"evolve": "enact.cli._evolve:evolve", "lineage": "enact.cli._lineage:lineage"}

    def metrics(self, registry: CollectorRegistry) -> None:
        from enact.evolution.metrics import EvolutionMetrics
        from enact.metrics import feature_metrics

        feature_metrics(registry, EvolutionMetrics)

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.evolution import curator_actor, evolve_actor, lineage_actor, scanner_actor
        from enact.messages.reviews import Landed
        from enact.messages.tasks import TaskChanged

        return [
            ActorSpec(name="scanner", actor=scanner_actor.ScannerActor, databases=scanner_actor.DATABASES,
                      depends_on=("epoch", "inbox", "tasks"), options={"runtime": parts.runtime}),
            ActorSpec(name="curator", actor=curator_actor.CuratorActor, databases=curator_actor.DATABASES,
                      depends_on=("epoch", "tasks", "reviews", "scanner"), options={"runtime": parts.runtime},
                      subscribes=(TaskChanged, Landed)),
            ActorSpec(name="lineage", actor=lineage_actor.LineageActor, databases=lineage_actor.DATABASES,
                      depends_on=("epoch", "curator"), options={"runtime": parts.runtime}),
            # The evolve run asks the scanner, the curator, the lineage inbox, memory and the inbox, and
            # reads the budget (its actor fills the gate).
            ActorSpec(name="evolve", actor=evolve_actor.EvolveActor, databases=evolve_actor.DATABASES,
                      depends_on=("epoch", "scanner", "curator", "lineage", "memory", "inbox", "budget"),
                      options={"budget": parts.budget}),
        ]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.evolution.commands import evolve_commands
        from enact.evolution.mode_commands import mode_commands

        return [*evolve_commands(), *mode_commands()]
