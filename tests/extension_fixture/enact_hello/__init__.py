"""A third-party component: its settings, an environment check, one wire
request it serves itself (``hello.Greet``) and an actor of its own that
serves another (``hello.Ping``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enact.actors._asks import Asker
from enact.actors._base import EnactActor, UnknownMessage
from enact.actors.supervisor import ActorSpec
from enact.components import Component, ComponentError, WireHandler
from enact.config import Check, Config, Setting
from enact.messages import Request, reply, request


@request("hello.Greet")
@dataclass(frozen=True, slots=True, kw_only=True)
class Greet(Request["Greeting"]):
    """Ask the hello extension for its greeting."""

    name: str = "owner"


@reply("hello.Greeting")
@dataclass(frozen=True, slots=True, kw_only=True)
class Greeting:
    text: str


@request("hello.Ping")
@dataclass(frozen=True, slots=True, kw_only=True)
class Ping(Request["Pong"]):
    """Ask the hello actor whether it runs."""


@reply("hello.Pong")
@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    pings: int


class HelloActor(EnactActor):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pings = 0

    def handle(self, message: Any) -> Any:
        match message:
            case Ping():
                self._pings += 1
                return Pong(pings=self._pings)
        raise UnknownMessage(self.context.name, message)


class HelloComponent(Component):
    name = "hello"
    settings = (
        Setting("hello.greeting", str, "hello", "What the hello extension says",
                Check("1 to 40 characters", lambda value: 1 <= len(value) <= 40)),
        Setting("hello.needs_file", str, "", "A file that must exist for the hello extension to start"),
    )

    def validate_environment(self, settings: Config) -> None:
        needed = settings["hello.needs_file"]
        if needed and not Path(needed).exists():
            raise ComponentError(f"hello: hello.needs_file {needed} does not exist")

    def actors(self, settings: Config) -> list[ActorSpec]:
        return [ActorSpec(name="hello", actor=HelloActor)]

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        greeting = settings["hello.greeting"]
        return {Greet: lambda message: Greeting(text=f"{greeting}, {message.name}")}
