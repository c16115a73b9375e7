"""The message history of a session on a stateless runtime (``openai``).

The Sessions actor stores it (``runtime.histories``) and the Conversation
sends it with each call. It is trimmed to a character budget: the first
message, which carries the startup context, always stays; the oldest of the
others go first."""

from __future__ import annotations

from collections.abc import Sequence

from enact.messages.sessions import HistoryMessage
from enact.runtime import Capabilities


def host_keeps_history(capabilities: Capabilities) -> bool:
    """A runtime whose capabilities say ``keeps_history`` False gets its
    session's history from the host with each call (and ``history_chars``
    bounds it)."""
    return not capabilities.keeps_history


def trim(messages: Sequence[HistoryMessage], budget_chars: int) -> tuple[HistoryMessage, ...]:
    """The first message and the newest others whose contents fit in
    ``budget_chars`` together with it (the first is kept even alone over it)."""
    if not messages:
        return ()
    first, rest = messages[0], messages[1:]
    room = budget_chars - len(first.content)
    kept: list[HistoryMessage] = []
    for message in reversed(rest):
        room -= len(message.content)
        if room < 0:
            break
        kept.append(message)
    kept.reverse()
    # An answer whose question was trimmed away would read as an answer to
    # the first message: drop such orphans.
    while kept and kept[0].role == "assistant" and len(kept) < len(rest):
        kept.pop(0)
    return (first, *kept)
