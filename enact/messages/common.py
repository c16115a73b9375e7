"""Types shared by every actor protocol: origins and generic replies.

Every protocol answers an expected failure with one of two replies declared
here, never with a type of its own: ``Refused`` (understood and declined,
nothing changed: a reason in words and a code to branch on) and ``NotFound``
(what it names does not exist: a kind and an id). The CLI turns both into
its ``--json`` statuses ``refused`` and ``not_found`` in one place
(``enact.cli._options.failure_of``); a command handler, into a receipt in
one place (``enact.commands.answered``).
"""

from __future__ import annotations

import enum

from enact.frozen_dataclass import dataclass
from enact.messages._registry import reply

Origin = str
"""Who caused a message: ``human-cli``, ``chat:<channel>``, ``model-action``,
``scheduler``, ``extension:<name>`` or ``human-console``. The control socket
stamps ``human-cli`` itself, the console ``human-console``; a caller cannot
choose its own origin."""

MAX_ID = 256
"""Longest id (conversation, message, sender, event) a chat event may carry."""
MAX_TEXT = 64 * 1024
"""Longest text a chat event may carry."""

HUMAN_CLI: Origin = "human-cli"
HUMAN_CONSOLE: Origin = "human-console"
"""The owner in the web console, signed in with a token only the control
socket hands out: the owner's authority, like the CLI's, recorded apart."""
MODEL_ACTION: Origin = "model-action"


def chat_origin(channel: str) -> Origin:
    return f"chat:{channel}"


def is_human(origin: Origin) -> bool:
    """A person typed it: the owner's CLI or console, or a chat message (never a model)."""
    return origin in (HUMAN_CLI, HUMAN_CONSOLE) or origin.startswith("chat:")


class RefusalCode(enum.StrEnum):
    """The codes every protocol shares. A protocol adds words of its own
    where a caller branches on them (``reviews.LandRefusal``)."""

    INVALID = "invalid"  # an argument is malformed or out of range: fix the request
    NOT_HUMAN = "not-human"  # only a person may ask this (the owner's CLI or chat), never a model
    WRONG_STATE = "wrong-state"  # what it names is not in a state that allows it (ended, not active, ...)
    LIMIT = "limit"  # a bound is reached (the backlog is full)
    UNSUPPORTED = "unsupported"  # this daemon cannot do it (the runtime cannot work in a repository)
    BUSY = "busy"  # one is running already: ask again later
    FENCED = "fenced"  # this daemon was taken over: it does nothing more


@reply("common.Refused")
@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """An expected refusal: the request was understood and declined, and
    nothing changed. ``reason`` is one line for a person (never the refused
    text itself, which may hold a credential); ``code`` a word a caller
    branches on (a ``RefusalCode``, or a protocol's own)."""

    reason: str
    code: str


@reply("common.NotFound")
@dataclass(frozen=True, slots=True, kw_only=True)
class NotFound:
    """What the request names does not exist: ``kind`` says what was looked
    for ("task", "review", "backlog item", ...), ``id`` by what."""

    kind: str
    id: str

    @property
    def line(self) -> str:
        return f"no {self.kind} {self.id}"


@reply("common.Done")
@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    """An acknowledgement with nothing more to say."""
