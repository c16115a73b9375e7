"""What an ask can end in besides its declared reply: typed errors.

An ask returns the reply its request declares (``Request[R]``) or raises one
of these, all within the one deadline the caller gave, commit wait included.
A refusal from the fence (``epoch.Fenced``) becomes ``FencedError`` unless the
request declares it as a reply (``epoch.RequireCurrent`` does).
"""

from __future__ import annotations

from typing import TypeVar, cast

from enact.errors import EnactError
from enact.fence import FencedError
from enact.messages._registry import Request, reply_types
from enact.messages.epoch import Fenced

R = TypeVar("R")


class ActorUnavailable(EnactError, RuntimeError):
    """The actor asked is not running, died before answering, or did not
    answer in time."""


class ActorNotFound(ActorUnavailable, LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no actor named {name!r} is running")


class AskTimeout(ActorUnavailable, TimeoutError):
    def __init__(self, name: str, message: object, timeout: float) -> None:
        super().__init__(f"actor {name!r} did not answer {type(message).__name__} within {timeout:g} s")


class UnexpectedReply(EnactError, TypeError):
    """The actor answered with something its request does not declare: a bug."""

    def __init__(self, message: object, reply: object) -> None:
        super().__init__(f"{type(message).__name__} got an unexpected reply: {type(reply).__name__}")
        self.reply = reply


def checked_reply(message: Request[R], reply: object) -> R:
    expected = reply_types(type(message))
    if isinstance(reply, expected):
        return cast(R, reply)
    if isinstance(reply, Fenced):
        raise FencedError(reply.generation, reply.current_generation)
    raise UnexpectedReply(message, reply)

