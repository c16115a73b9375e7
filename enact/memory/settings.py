"""Memory's settings (``memory``): its keys, and the typed value its actor and
the conversations read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enact.config import Config, Setting, between
from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:  # the context's rules (facts, ranking) load when a value is built, not with the keys
    from enact.memory.context import ContextSettings

SETTINGS: tuple[Setting, ...] = (
    Setting("memory.max_fact_chars", int, 500, "A longer fact is clipped, with a visible mark", between(40, 10000)),
    Setting("memory.confirm_model_facts", bool, False,
            "Facts from [MEMORY] markers are held until `enact memory confirm`"),
    Setting("memory.max_pending_per_conversation", int, 20,
            "Facts one conversation that is not the owner's may have held for confirmation", between(0, 10_000)),
    Setting("memory.context_chars", int, 8000, "Budget of the facts in the startup context", between(0, 200_000)),
    Setting("memory.identity_chars", int, 4000, "Budget of each identity in the startup context",
            between(0, 100_000)),
    Setting("memory.send_private", bool, False, "Private facts may be sent to the model (secret ones never are)"),
    Setting("memory.recall_k", int, 8, "Facts recalled for each owner message", between(0, 100)),
    Setting("memory.recall_chars", int, 2000, "Budget of the recalled facts", between(0, 100_000)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySettings:
    max_fact_chars: int
    confirm_model_facts: bool
    max_pending_per_conversation: int
    context: ContextSettings
    """What the model is told from memory: the budgets, and whether private facts go."""

    @classmethod
    def from_config(cls, config: Config) -> MemorySettings:
        from enact.memory.context import ContextSettings

        values = config.values
        return cls(
            max_fact_chars=values["memory.max_fact_chars"],
            confirm_model_facts=values["memory.confirm_model_facts"],
            max_pending_per_conversation=values["memory.max_pending_per_conversation"],
            context=ContextSettings(
                context_chars=values["memory.context_chars"],
                identity_chars=values["memory.identity_chars"],
                recall_k=values["memory.recall_k"],
                recall_chars=values["memory.recall_chars"],
                send_private=values["memory.send_private"],
            ),
        )
