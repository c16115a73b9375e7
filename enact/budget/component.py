"""The budget component: its settings (``budget``) and the budget actor,
which keeps the day's ledger behind the gate every runtime call reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from enact.budget import settings as budget_settings
from enact.components import Component, DaemonParts

if TYPE_CHECKING:
    from enact.actors.supervisor import ActorSpec


class BudgetComponent(Component):
    name = "budget"
    settings = budget_settings.SETTINGS

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        from enact.actors.supervisor import ActorSpec
        from enact.budget import budget_actor

        # After the inbox and the queue, which it tells (its notices, the tasks it resumes). The gate
        # it fills holds today's ledger before any actor starts (``prepare``): the inbox resumes an
        # unfinished chat, whose call reads the gate, before this actor starts.
        return [ActorSpec(name="budget", actor=budget_actor.BudgetActor, databases=budget_actor.DATABASES,
                          depends_on=("epoch", "inbox", "tasks"), options={"gate": parts.budget},
                          prepare=budget_actor.fill_gate(parts.budget))]
