"""Words a line of output builds from values, said right whatever the value."""

from __future__ import annotations


def counted(count: int, singular: str, plural: str = "") -> str:
    """``count`` and its noun agreeing with it: "1 call", "2 calls", "0 calls";
    ``plural`` for a noun that does not just add an s ("reply", "replies")."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"
