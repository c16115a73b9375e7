"""The cursor rule: a channel's acknowledged cursor never passes an event
that is still unfinished, and reaches the highest finished one once nothing
below it is unfinished.

Cursors are a channel's own positions (``ChatEvent.cursor``); events finish
in any order, since conversations run in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ChannelCursor:
    """One channel's unfinished events and the highest finished one."""

    unfinished: set[int] = field(default_factory=set)
    highest_finished: int = 0

    def received(self, cursor: int) -> None:
        self.unfinished.add(cursor)

    def target(self, finishing: int) -> int:
        """Where the cursor may go once ``finishing`` is done: over finished
        events, never past one that is still unfinished."""
        others = self.unfinished - {finishing}
        highest = max(self.highest_finished, finishing)
        return min(min(others) - 1, highest) if others else highest

    def finished(self, cursor: int) -> int:
        """Forget ``cursor`` as unfinished; the acknowledged cursor now."""
        target = self.target(cursor)
        self.unfinished.discard(cursor)
        self.highest_finished = max(self.highest_finished, cursor)
        return target


class Cursors:
    """Every channel's cursor rule, by channel name."""

    def __init__(self) -> None:
        self._channels: dict[str, ChannelCursor] = {}

    def of(self, channel: str) -> ChannelCursor:
        found = self._channels.get(channel)
        if found is None:
            found = self._channels[channel] = ChannelCursor()
        return found
