"""Asks: the one way to ask an actor, and what an ask can end in besides
its declared reply.

An ask returns the reply its request declares (``Request[R]``) or raises one
of these, all within the one deadline the caller gave, commit wait included.
A refusal from the fence (``epoch.Fenced``) becomes ``FencedError`` unless the
request declares it as a reply (``epoch.RequireCurrent`` does). The reply is
checked here, once (``checked_reply``), so no caller checks its type again.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, cast

from enact.errors import EnactError
from enact.fence import FencedError
from enact.messages._registry import Request, is_reply_to
from enact.messages.epoch import Fenced

R = TypeVar("R")


class Asker(Protocol):
    """Ask the actor ``target`` and wait for the reply ``request`` declares
    (``Supervisor.ask``, ``ActorContext.ask``, the daemon's ask with the
    control deadline); raises the errors below, never returns another type."""

    def __call__(self, target: str, request: Request[R], /) -> R: ...


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
    if is_reply_to(message, reply):
        return cast(R, reply)
    if isinstance(reply, Fenced):
        raise FencedError(reply.generation, reply.current_generation)
    raise UnexpectedReply(message, reply)

