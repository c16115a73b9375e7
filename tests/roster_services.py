"""The daemon's actors as its components declare them, without a daemon."""

from __future__ import annotations

from pathlib import Path

from enact import components
from enact.actors.supervisor import ActorSpec
from enact.chat.services import ChatServices
from enact.commands import CommandRegistry
from enact.components import DaemonParts
from enact.config import Config
from enact.runtime import Capabilities, RuntimeRequest, RuntimeResult


class _NeverCalled:
    """A runtime the roster reads the capabilities of and never calls."""

    name = "never-called"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the never-called runtime"

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        raise AssertionError("the roster's runtime is not called")


def roster_services() -> ChatServices:
    """Services enough to list the roster's specs (none of them is started)."""
    return ChatServices(channels={}, runtime=_NeverCalled(), commands=CommandRegistry(), startup_context="",
                        origins={})


def daemon_actors(services: ChatServices, settings: Config | None = None) -> list[ActorSpec]:
    """Every actor enact's own components and the installed extensions add,
    made from ``services`` as the daemon makes them from its parts."""
    parts = DaemonParts(settings=settings if settings is not None else Config(Path("."), {}), runtime=services.runtime,
                        channels=services.channels, origins=services.origins, commands=services.commands)
    return components.component_actors(components.load(), parts)


def daemon_parts(home: Path) -> DaemonParts:
    """Parts enough to list the components' actors (none of them is started)."""
    services = roster_services()
    return DaemonParts(settings=components.load().load_config(home, environ={}), runtime=services.runtime,
                       channels=services.channels, origins=services.origins, commands=services.commands)
