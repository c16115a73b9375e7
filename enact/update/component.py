"""The update component: ``update.*`` settings, ``enact update`` (check,
update, rollback, history), ``/update`` in the owner's chat, and the actor
through which an attempt tells the owner how it ended."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.components import Component, DaemonParts
from enact.update import settings as update_settings

if TYPE_CHECKING:
    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry


class UpdateComponent(Component):
    name = "update"
    settings = update_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"update": "enact.cli._update:update"}

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.update.update_actor import UpdateActor

        return [ActorSpec(name="update", actor=UpdateActor, depends_on=("epoch", "inbox"))]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.update.commands import update_commands

        return update_commands()
