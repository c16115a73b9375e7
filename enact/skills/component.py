"""The skills component: ``enact learn`` and ``enact skills``, the skills
actor, their chat commands and the limits a skill folder is checked against."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from enact.components import Component, DaemonParts
from enact.skills import settings as skills_settings

if TYPE_CHECKING:
    from enact.actors.supervisor import ActorSpec
    from enact.commands import Command, CommandRegistry


class SkillsComponent(Component):
    name = "skills"
    settings = skills_settings.SETTINGS
    cli: ClassVar[Mapping[str, str]] = {"learn": "enact.cli._skills:learn", "skills": "enact.cli._skills:skills"}

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.skills import skills_actor

        return [ActorSpec(name="skills", actor=skills_actor.SkillsActor, databases=skills_actor.DATABASES,
                          depends_on=("epoch", "curator", "memory"), options={"runtime": parts.runtime})]

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        from enact.skills.commands import skills_commands

        return skills_commands()
