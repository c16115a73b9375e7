"""The epoch fence's actor: answers who owns the home and whether this
daemon still does (the fence itself is ``enact.fence``)."""

from __future__ import annotations

from typing import Any

from enact.actors._base import EnactActor
from enact.messages.epoch import Current, Describe, Fenced, RequireCurrent


class EpochFenceActor(EnactActor):
    """Answers ``RequireCurrent`` and ``Describe`` for the daemon's fence."""

    def handle(self, message: Any) -> Any:
        fence = self.context.fence
        match message:
            case RequireCurrent():
                if fence.is_current():
                    return Current(generation=fence.generation)
                return Fenced(generation=fence.generation, current_generation=fence.current_generation())
            case Describe():
                owner = fence.owner()
                if owner is None:
                    raise RuntimeError("the epoch record is missing while the daemon runs")
                return owner
        return super().handle(message)
