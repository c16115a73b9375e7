"""A third-party component: one setting, an environment check and one wire
request (``hello.Greet``) that it serves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enact.components import Ask, Component, ComponentError, WireHandler
from enact.config import Check, Config, Setting
from enact.messages import reply, request


@request("hello.Greet")
@dataclass(frozen=True, slots=True, kw_only=True)
class Greet:
    """Ask the hello extension for its greeting."""

    name: str = "owner"


@reply("hello.Greeting")
@dataclass(frozen=True, slots=True, kw_only=True)
class Greeting:
    text: str


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

    def handlers(self, settings: Config, ask: Ask) -> Mapping[type[Any], WireHandler]:
        greeting = settings["hello.greeting"]
        return {Greet: lambda message: Greeting(text=f"{greeting}, {message.name}")}
