"""The daemon's own component: its settings (``enact.config``), the epoch
fence's actor and the token tally; ``/help`` and ``/status``; the commands
that run and ask the daemon itself (``daemon``, ``status``, ``config``,
``call``, ``channel``, ``runtime``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact import config
from enact.components import Component, DaemonParts

if TYPE_CHECKING:
    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry


class CoreComponent(Component):
    name = "core"
    sections = ("daemon", "supervisor", "storage", "control", "runtime")
    settings = config.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {
        "daemon": "enact.cli._daemon:daemon",
        "status": "enact.cli._commands:status",
        "config": "enact.cli._commands:config_group",
        "call": "enact.cli._commands:call",
        "channel": "enact.cli._channel:channel_group",
        "runtime": "enact.cli._runtime:runtime_group",
    }

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.epoch_actor import EpochFenceActor
        from enact.runtime import accounting_actor

        return [
            ActorSpec(name="epoch", actor=EpochFenceActor),
            ActorSpec(name="accounting", actor=accounting_actor.AccountingActor,
                      databases=(accounting_actor.DATABASE,), depends_on=("epoch",)),
        ]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.commands import builtin_commands

        return builtin_commands(registry)
