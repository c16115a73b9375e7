"""Broken and odd components for tests/test_components.py, loaded through
entry points made in the test (this module is importable as tests/ is on
the path)."""

from __future__ import annotations

from enact.actors._base import EnactActor
from enact.actors.supervisor import ActorSpec
from enact.components import Component, DaemonParts, RuntimeComponent
from enact.config import Config, Setting, between
from enact.runtime import Capabilities, RuntimeRequest, RuntimeResult


class Fine(Component):
    name = "fine"
    settings = (Setting("fine.level", int, 1, "A level", between(0, 10)),)


def make_fine() -> Component:
    return Fine()


class Taken(Component):
    name = "local"


class Reserved(Component):
    name = "enact"


class NamedLikeAProtocol(Component):
    name = "inbox"


class NamedLikeACoreSection(Component):
    name = "evolve"


def named(name: str) -> Component:
    """A component with nothing but ``name``."""
    return type(f"Named_{name}", (Component,), {"name": name})()


class OutsideItsSection(Component):
    name = "stray"
    settings = (Setting("chat.stray", str, "", "A key in the core's section"),)


class BadDefault(Component):
    name = "baddefault"
    settings = (Setting("baddefault.count", int, "three", "A count whose default is text", between(0, 10)),)


class SameKeyAsCore(Component):
    name = "copycat"
    sections = ("daemon",)
    settings = (Setting("daemon.workers", int, 2, "Declared twice", between(0, 64)),)


class Pong(EnactActor):
    pass


class MisnamedActor(Component):
    name = "misnamed"

    def actors(self, parts: DaemonParts) -> list[ActorSpec]:
        return [ActorSpec(name="inbox", actor=Pong)]


class TwoActors(Component):
    name = "two"

    def actors(self, parts: DaemonParts) -> list[ActorSpec]:
        return [ActorSpec(name="two", actor=Pong), ActorSpec(name="two:helper", actor=Pong)]


class NotAComponent:
    name = "plain"


class EchoRuntime:
    name = "echo"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the echo runtime"

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        return RuntimeResult(text=request.owner_message)


class EchoRuntimeComponent(RuntimeComponent):
    name = "echo"

    def make_runtime(self, settings: Config, commands: object) -> EchoRuntime:
        return EchoRuntime()
