"""The backup component: ``enact backup``, its settings, its metrics and
the backup actor (backups the running daemon takes, and the schedule)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.backup import settings as backup_settings
from enact.components import Component, DaemonParts

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors.supervisor import ActorSpec


class BackupComponent(Component):
    name = "backup"
    settings = backup_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"backup": "enact.cli._backup:backup", "home": "enact.cli._home:home"}

    def metrics(self, registry: CollectorRegistry) -> None:
        from enact.backup.metrics import BackupMetrics
        from enact.metrics import feature_metrics

        feature_metrics(registry, BackupMetrics)

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.backup import backup_actor

        return [ActorSpec(name="backup", actor=backup_actor.BackupActor, databases=backup_actor.DATABASES,
                          depends_on=("epoch",))]
