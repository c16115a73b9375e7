"""The registry of stable wire names for typed messages.

Every message and reply is a frozen, slotted, keyword-only dataclass. Its wire
name is ``"<prefix>.<Class>"``: the prefix names who handles a request (an
actor, a component, or the control server for ``control.*``) and the module
that declares it, so routing needs no second table.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, ForwardRef, Generic, TypeVar

T = TypeVar("T")
R_co = TypeVar("R_co", covariant=True)


class Request(Generic[R_co]):
    """The base of every request: ``R_co`` is the reply it gets, so that an
    ask is typed (``Plan(Request["Recorded | Refused"])``; a string, because
    the reply is usually declared after its request). Any reply may also be
    a refusal from the fence, which an ask turns into ``FencedError``."""

    __slots__ = ()


_REPLIES: dict[type[Any], tuple[type[Any], ...]] = {}


def reply_types(cls: type[Any]) -> tuple[type[Any], ...]:
    """The reply classes a request class declares (resolved on first use)."""
    found = _REPLIES.get(cls)
    if found is not None:
        return found
    declared = next((b for b in getattr(cls, "__orig_bases__", ()) if typing.get_origin(b) is Request), None)
    if declared is None:
        raise TypeError(f"{cls.__qualname__} does not declare its reply: derive it from Request[...]")
    hint: Any = typing.get_args(declared)[0]
    if isinstance(hint, ForwardRef):
        hint = eval(hint.__forward_arg__, vars(sys.modules[cls.__module__]), _ProtocolNames())
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members: tuple[Any, ...] = typing.get_args(hint) if union else (hint,)
    # isinstance checks the class only: list[str] is checked as list.
    resolved = tuple(type(None) if member is None else typing.get_origin(member) or member for member in members)
    _REPLIES[cls] = resolved
    return resolved


def is_reply_to(message: Request[Any], reply: object) -> bool:
    """Whether ``reply`` is one that ``message`` declares: the one check an
    ask makes, in the daemon (``enact.actors._asks``) and in the CLI."""
    return isinstance(reply, reply_types(type(message)))


class _ProtocolNames(dict[str, Any]):
    """Resolves a protocol's prefix in a reply hint to its module, imported
    then: ``Request["inbox.Outcome"]`` lets a request name another
    protocol's reply without importing it (a CLI command loads only what it
    sends before it talks to the daemon). The request's own module is
    searched first, as globals."""

    def __missing__(self, name: str) -> Any:
        if name not in protocols():
            raise KeyError(name)
        return importlib.import_module(f"enact.messages.{name}")


class Kind(enum.Enum):
    """What the control socket may do with a registered type."""

    REQUEST = "request"  # may be sent from the CLI (`enact call`)
    REPLY = "reply"  # only ever sent back
    INTERNAL = "internal"  # actors send it to each other; refused from the wire


@dataclasses.dataclass(frozen=True, slots=True)
class Registration:
    name: str
    cls: type[Any]
    kind: Kind
    plumbing: bool = False
    """A request the actors (or the daemon) send each other, which the wire
    takes too (for tools and tests): ``enact call --list`` shows it only
    with ``--all``."""
    long_wait: str = ""
    """A long request: the name of the setting (seconds) that bounds its
    work, which the control socket waits for on top of
    ``control.request_timeout_s`` (the asks around that work); "": the
    request timeout alone."""

    @property
    def actor(self) -> str:
        return self.name.split(".", 1)[0]


_BY_NAME: dict[str, Registration] = {}
_BY_CLASS: dict[type[Any], Registration] = {}


def _register(name: str, kind: Kind, *, plumbing: bool = False, long_wait: str = "") -> Callable[[type[T]], type[T]]:
    if name.count(".") != 1 or not all(name.split(".")):
        raise ValueError(f"message name {name!r} must look like 'actor.Type'")

    def decorate(cls: type[T]) -> type[T]:
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen or not hasattr(cls, "__slots__"):
            raise TypeError(f"{cls.__qualname__} must be a frozen, slotted dataclass")
        existing = _BY_NAME.get(name)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"message name {name!r} is already taken by {existing.cls.__qualname__}")
        registration = Registration(name=name, cls=cls, kind=kind, plumbing=plumbing, long_wait=long_wait)
        _BY_NAME[name] = registration
        _BY_CLASS[cls] = registration
        return cls

    return decorate


def request(name: str, *, plumbing: bool = False, long_wait: str = "") -> Callable[[type[T]], type[T]]:
    """Register a message that callers (including the CLI) may send; it
    derives from ``Request[...]``, which names its reply. ``plumbing``: one
    enact sends itself, not the owner (``Registration.plumbing``);
    ``long_wait``: the setting that bounds its work (``Registration.long_wait``)."""
    register = _register(name, Kind.REQUEST, plumbing=plumbing, long_wait=long_wait)

    def decorate(cls: type[T]) -> type[T]:
        if not issubclass(cls, Request):
            raise TypeError(f"request {name!r} must derive from Request[<its reply type>]")
        return register(cls)

    return decorate


def reply(name: str) -> Callable[[type[T]], type[T]]:
    """Register a reply or event type."""
    return _register(name, Kind.REPLY)


def internal(name: str) -> Callable[[type[T]], type[T]]:
    """Register a message only actors may send to each other."""
    return _register(name, Kind.INTERNAL)


_PROTOCOLS: tuple[str, ...] = ()


def protocols() -> tuple[str, ...]:
    """The protocol modules of ``enact.messages``: every module of the
    package not named with a leading ``_``. A wire name's prefix is the module
    that declares it, which is imported when one of its names is first looked
    up: a CLI command loads only the protocols it speaks (a dataclass costs
    about half a millisecond to create, and every command pays it at start)."""
    global _PROTOCOLS
    if not _PROTOCOLS:
        names = os.listdir(os.path.dirname(__file__))
        _PROTOCOLS = tuple(sorted(name[:-3] for name in names if name.endswith(".py") and not name.startswith("_")))
    return _PROTOCOLS


def _load_protocol(prefix: str) -> None:
    if prefix in protocols():
        importlib.import_module(f"enact.messages.{prefix}")


def lookup(name: str) -> Registration | None:
    registration = _BY_NAME.get(name)
    if registration is None:
        _load_protocol(name.partition(".")[0])
        registration = _BY_NAME.get(name)
    return registration


def registration_of(cls: type[Any]) -> Registration | None:
    return _BY_CLASS.get(cls)


def type_name(message: object) -> str:
    registration = _BY_CLASS.get(type(message))
    if registration is None:
        raise TypeError(f"{type(message).__qualname__} is not a registered message type")
    return registration.name


def registered() -> list[Registration]:
    for prefix in protocols():
        _load_protocol(prefix)
    return sorted(_BY_NAME.values(), key=lambda r: r.name)
