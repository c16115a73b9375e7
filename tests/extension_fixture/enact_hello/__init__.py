"""A third-party component: its settings, an environment check, one wire
request it serves itself (``hello.Greet``), an actor of its own that serves
another (``hello.Ping``) and counts them in a metric of its own, a chat
command (``/hello.ping``) and a CLI command (``enact hello``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry, Counter

from enact.actors._asks import Asker
from enact.actors._base import EnactActor, UnknownMessage
from enact.actors.supervisor import ActorSpec
from enact.commands import Authority, Command, CommandCall, CommandContext, CommandRegistry
from enact.components import Component, ComponentError, DaemonParts, WireHandler
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
    def __init__(self, *args: Any, pinged: Counter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pings = 0
        self._pinged = pinged

    def handle(self, message: Any) -> Any:
        match message:
            case Ping():
                self._pings += 1
                self._pinged.inc()
                return Pong(pings=self._pings)
        raise UnknownMessage(self.context.name, message)


def _ping(call: CommandCall, context: CommandContext) -> str:
    pong = context.ask("hello", Ping())
    assert isinstance(pong, Pong)
    return f"pong {pong.pings}"


class HelloComponent(Component):
    name = "hello"
    cli: ClassVar[Mapping[str, str]] = {"hello": "enact_hello.cli:hello"}
    settings = (
        Setting("hello.greeting", str, "hello", "What the hello extension says",
                Check("1 to 40 characters", lambda value: 1 <= len(value) <= 40)),
        Setting("hello.needs_file", str, "", "A file that must exist for the hello extension to start"),
    )

    def validate_environment(self, settings: Config) -> None:
        needed = settings["hello.needs_file"]
        if needed and not Path(needed).exists():
            raise ComponentError(f"hello: hello.needs_file {needed} does not exist")

    def metrics(self, registry: CollectorRegistry) -> None:
        self._pinged = Counter("enact_hello_pings", "Pings the hello actor answered", registry=registry)

    def actors(self, parts: DaemonParts) -> list[ActorSpec]:
        return [ActorSpec(name="hello", actor=HelloActor, options={"pinged": self._pinged})]

    def commands(self, registry: CommandRegistry) -> list[Command]:
        return [Command(name="hello.ping", summary="ping the hello actor", handler=_ping,
                        authority=Authority.PUBLIC)]

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        greeting = settings["hello.greeting"]
        return {Greet: lambda message: Greeting(text=f"{greeting}, {message.name}")}
