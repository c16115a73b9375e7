"""What the supervisor knows of an actor: how to make it (its spec), its
record across restarts (its slot), and the order to start a set of them."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

import pykka

from enact.frozen_dataclass import dataclass

if TYPE_CHECKING:
    from enact.actors._base import EnactActor
    from enact.actors._idle_reads import IdleReads
    from enact.messages.control import ActorStatus
    from enact.storage import Store


@dataclass(frozen=True, slots=True)
class ActorSpec:
    """How to make one actor: its name, what it needs started first, and the
    databases it owns (granted once, at start-up)."""

    name: str
    actor: type[EnactActor]
    databases: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    subscribes: tuple[type[Any], ...] = ()
    """Event types told to this actor whenever an actor publishes one."""
    listening: Callable[[], bool] | None = None
    """With ``subscribes``: whether the actor wants its events now (read at
    each publish, so it must be cheap); None: always. An event published
    while it says no is not told (the console's, with no page open)."""
    pools: tuple[str, ...] = ()
    """The families of the keyed pools it keeps (``conversation``): each child
    is named ``<family>:<key>`` and counted under its family."""
    prepare: Callable[[Store], None] | None = None
    """Run once with its store (it needs ``databases``) before any actor
    starts: what others read of it without asking (the budget's gate) is
    then in place before the first of them starts, whatever the order."""

    @property
    def families(self) -> tuple[str, ...]:
        """What its metrics count it and its pools' children under."""
        return (self.name, *self.pools)


@dataclass(slots=True, eq=False)
class ActorSlot:
    """The supervisor's record of one named actor; survives its restarts."""

    spec: ActorSpec
    family: str
    ref: pykka.ActorRef[Any] | None = None
    handled: int = 0
    restarts: int = 0
    recent_restarts: deque[float] = field(default_factory=deque)
    stopping: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)
    idle_reads: IdleReads | None = None
    """The current incarnation's idle reads (``enact.actors._idle_reads``)."""
    reported: ActorStatus | None = None
    """The status last reported of it, given again while nothing in it changed."""


def dependency_order(specs: Sequence[ActorSpec]) -> list[ActorSpec]:
    by_name = {spec.name: spec for spec in specs}
    if len(by_name) != len(specs):
        raise ValueError("two actor specs share a name")
    ordered: list[ActorSpec] = []
    state: dict[str, str] = {}

    def visit(spec: ActorSpec, path: tuple[str, ...]) -> None:
        if state.get(spec.name) == "done":
            return
        if state.get(spec.name) == "visiting":
            raise ValueError(f"actor dependency cycle: {' -> '.join((*path, spec.name))}")
        state[spec.name] = "visiting"
        for dependency in spec.depends_on:
            if dependency not in by_name:
                raise ValueError(f"actor {spec.name} depends on unknown actor {dependency}")
            visit(by_name[dependency], (*path, spec.name))
        state[spec.name] = "done"
        ordered.append(spec)

    for spec in specs:
        visit(spec, ())
    return ordered
