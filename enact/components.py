"""Components: the parts of enact that bring their own configuration.

A component (a chat channel, a runtime adapter, later memory and tasks, or
an installed extension) is a ``Component`` subclass, in the shape of
Mopidy's ``Extension``: a name, the settings of its config section (with
defaults and checks), an environment check run at daemon start, and what it
adds to the daemon: actors, the wire requests it serves (their prefix is the
component's name), a channel or a runtime.

enact's own components (the local channel, the scripted runtime) are built
in, so a source checkout works without being installed; an installed package
adds one through the ``enact.extensions`` entry-point group, each entry
point naming a Component subclass or a factory that returns an instance.
A broken extension stops the daemon at start with one line naming it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from enact import config
from enact.config import Config, ConfigError, RuntimeSettings, Setting
from enact.errors import EnactError
from enact.messages._registry import PROTOCOLS
from enact.messages.common import Origin, chat_origin

if TYPE_CHECKING:
    import importlib.metadata

    from enact.actors._asks import Asker
    from enact.actors.supervisor import ActorSpec
    from enact.channels import Channel
    from enact.commands import CommandRegistry
    from enact.runtime import Runtime

GROUP = "enact.extensions"

RESERVED_NAMES = frozenset({"core", "enact", "channels"})
"""Words the daemon keeps that name no section, protocol or actor of its own.
No component may take one, nor a section of enact's own settings
(``Components.own``), nor the prefix of one of enact's own protocols
(``PROTOCOLS``, but those a built-in component serves: ``local``), nor, when
the daemon starts, the name of one of its actors or of their pools' families
(the roster's: ``component_actors``)."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


WireHandler = Callable[[Any], object]
"""Serves one request type in the control connection's thread."""


class ComponentError(EnactError):
    """A component cannot be loaded or its environment is not usable; one line."""


class Component:
    """Subclass it; set ``name`` and ``settings``, override what applies."""

    name: ClassVar[str] = ""
    settings: ClassVar[tuple[Setting, ...]] = ()
    sections: ClassVar[tuple[str, ...]] = ()
    """Config sections its keys may live in; empty means its own name only."""

    def validate_environment(self, settings: Config) -> None:
        """Raise ComponentError (one line) if the daemon cannot use this
        component as configured: a missing binary, an unset token."""

    def actors(self, settings: Config) -> Sequence[ActorSpec]:
        """The actors it adds to the supervisor, each named after the
        component (``<name>`` or ``<name>:<part>``), so that its wire prefix
        reaches them."""
        return ()

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        """The wire requests it serves, each a registered request named
        ``<component name>.<Type>``; called once the actors exist."""
        return {}


class ChannelComponent(Component):
    """A chat channel; the daemon starts it after the actors, stops it before."""

    def origin(self) -> Origin:
        """Who the channel's events come from, as the inbox records it."""
        return chat_origin(self.name)

    def enabled(self, settings: Config) -> bool:
        """Whether the daemon runs this channel; a disabled one is only listed."""
        return True

    def make_channel(self, settings: Config) -> Channel:
        raise NotImplementedError

    def check(self, settings: Config) -> str:
        """``enact channel check``: try the channel's credentials and say how
        it went in one line; raise ComponentError if they do not work."""
        return f"the {self.name} channel has nothing to check"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCheck:
    """What ``enact runtime check`` says of a runtime without calling it."""

    found: str = ""
    """Where it is: a binary's path, an endpoint, ``built in``."""
    version: str = ""
    problems: tuple[str, ...] = ()
    """Each one line that says what to do; none means it looks usable."""
    notes: tuple[str, ...] = ()


class RuntimeComponent(Component):
    """A model runtime; ``runtime.adapter`` names the one the daemon uses."""

    def make_runtime(self, settings: Config, commands: CommandRegistry | None) -> Runtime:
        raise NotImplementedError

    def check(self, settings: Config) -> RuntimeCheck:
        """Is the binary or endpoint there, which version; quick, no model call."""
        return RuntimeCheck(found="built in")


@dataclass(frozen=True, slots=True)
class Components:
    """The loaded components, enact's own first."""

    items: tuple[Component, ...]
    own: tuple[Setting, ...] = config.SETTINGS
    """enact's own keys (``core``): the daemon's, and its features' when the
    caller gathered them (``enact.own_settings``), as this layer may not."""

    def settings(self) -> tuple[Setting, ...]:
        """Every key that exists: the core ones (``runtime.adapter`` choosing
        among the installed runtimes), then each component's."""
        runtimes = sorted(self.runtimes())
        core = tuple(
            dataclasses.replace(s, check=config.one_of(*runtimes)) if s.key == "runtime.adapter" else s
            for s in self.own
        )
        return core + tuple(
            dataclasses.replace(s, component=component.name) for component in self.items for s in component.settings
        )

    def load_config(
        self, home: Path, *, environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
    ) -> Config:
        return config.load(
            home, environ=os.environ if environ is None else environ, overrides=overrides, settings=self.settings()
        )

    def runtimes(self) -> dict[str, RuntimeComponent]:
        return {c.name: c for c in self.items if isinstance(c, RuntimeComponent)}

    def channels(self) -> list[ChannelComponent]:
        return [c for c in self.items if isinstance(c, ChannelComponent)]

    def runtime(self, settings: Config) -> RuntimeComponent:
        """The runtime component ``runtime.adapter`` names (the config check
        already refused any other value)."""
        return self.runtimes()[settings.typed(RuntimeSettings).adapter]

    def validate_environment(self, settings: Config) -> None:
        """Each component's check; only the runtime in use is checked of the runtimes."""
        chosen = settings.typed(RuntimeSettings).adapter
        for component in self.items:
            if isinstance(component, RuntimeComponent) and component.name != chosen:
                continue
            try:
                component.validate_environment(settings)
            except ComponentError:
                raise
            except Exception as error:  # a third-party check's defect, said in one line all the same
                raise ComponentError(
                    f"component {component.name}: its environment check failed: {type(error).__name__}: "
                    f"{_one_line(error)}"
                ) from None


def builtin(own: tuple[Setting, ...] = config.SETTINGS) -> Components:
    """enact's own components, without reading any entry point; ``own`` as
    in ``Components``."""
    from enact.channels.local import LocalChannelComponent
    from enact.channels.telegram_component import TelegramChannelComponent
    from enact.runtime.claude import ClaudeRuntimeComponent
    from enact.runtime.codex import CodexRuntimeComponent
    from enact.runtime.openai import OpenAIRuntimeComponent
    from enact.runtime.scripted import ScriptedRuntimeComponent

    return Components(items=(LocalChannelComponent(), TelegramChannelComponent(), ScriptedRuntimeComponent(),
                             CodexRuntimeComponent(), ClaudeRuntimeComponent(), OpenAIRuntimeComponent()), own=own)


def load(entry_points: Iterable[importlib.metadata.EntryPoint] | None = None, *,
         own: tuple[Setting, ...]) -> Components:
    """The built-in components plus every installed extension; raises
    ComponentError naming the first extension that cannot be used. ``own``
    as in ``Components``: no default, since an extension is checked against
    every section enact keeps."""
    import importlib.metadata  # only here: the CLI's other commands never read entry points

    found = importlib.metadata.entry_points(group=GROUP) if entry_points is None else entry_points
    items = list(builtin().items)
    for entry_point in sorted(found, key=lambda e: e.name):
        items.append(_load_extension(entry_point))
    components = Components(items=tuple(items), own=own)
    check(components)
    return components


def _load_extension(entry_point: importlib.metadata.EntryPoint) -> Component:
    where = f"extension {entry_point.name} ({entry_point.value})"
    try:
        made = entry_point.load()
        component = made() if callable(made) else made
    except Exception as error:  # whatever a third-party import raises
        raise ComponentError(f"{where} cannot be loaded: {type(error).__name__}: {_one_line(error)}") from None
    if not isinstance(component, Component):
        raise ComponentError(f"{where} is not an enact Component but {type(component).__qualname__}")
    if component.name != entry_point.name:
        raise ComponentError(f"{where} declares the name {component.name!r}; its entry point must have that name")
    return component


def check(components: Components) -> None:
    """Names are valid and unique, and every setting is well declared, lives
    in its component's sections and is declared once."""
    seen_names: set[str] = set()
    keys = {s.key: "core" for s in components.own}
    taken_by_enact = (RESERVED_NAMES | {s.key.partition(".")[0] for s in components.own}
                      | (set(PROTOCOLS) - {c.name for c in builtin().items}))
    variables = {s.env_name: "core" for s in components.own}
    for component in components.items:
        name = component.name
        if not _NAME.fullmatch(name):
            raise ComponentError(f"component {name!r}: a name is lower-case letters, digits and _ (at most 32)")
        if name in taken_by_enact or name in seen_names:
            raise ComponentError(f"component {name}: the name is already taken")
        seen_names.add(name)
        for setting in component.settings:
            try:
                config.check_declaration(setting)
            except ConfigError as error:
                raise ComponentError(f"component {name}: {error}") from None
            section = setting.key.partition(".")[0]
            if section not in (component.sections or (name,)):
                raise ComponentError(f"component {name}: setting {setting.key} is outside its section [{name}]")
            for taken, what in ((keys, setting.key), (variables, setting.env_name)):
                if what in taken:
                    raise ComponentError(f"component {name}: {what} is already declared by {taken[what]}")
                taken[what] = name


def component_actors(installed: Components, settings: Config, *, taken: Iterable[str]) -> list[ActorSpec]:
    """Every component's actors; raises ComponentError for a component named
    like one of the ``taken`` actors (the daemon's own, and their pools'
    families), or for an actor not named after its component or whose name is
    already taken."""
    names = set(taken)
    specs = []
    for component in installed.items:
        if component.name in names:
            raise ComponentError(f"component {component.name}: the name is already taken")
        for spec in component.actors(settings):
            if spec.name != component.name and not spec.name.startswith(f"{component.name}:"):
                raise ComponentError(f"component {component.name}: its actor {spec.name!r} must be named after it")
            if spec.name in names:
                raise ComponentError(f"component {component.name}: the actor name {spec.name!r} is already taken")
            names.add(spec.name)
            specs.append(spec)
    return specs


def routes(servers: Iterable[tuple[str, Mapping[type[Any], WireHandler]]]) -> dict[type[Any], WireHandler]:
    """Who serves which request in the control connection's thread, each
    ``(prefix, handlers)`` declared by whoever handles that prefix. A type
    must be a registered request under its server's prefix, so a wire name
    always says who handles it; raises ComponentError otherwise."""
    from enact.messages import Kind
    from enact.messages._registry import registration_of

    table: dict[type[Any], WireHandler] = {}
    for prefix, handlers in servers:
        for message_type, handler in handlers.items():
            registration = registration_of(message_type)
            if registration is None or registration.kind is not Kind.REQUEST:
                raise ComponentError(f"{prefix} serves {message_type.__qualname__}, which is not a wire request")
            if registration.actor != prefix:
                raise ComponentError(f"{prefix} cannot serve {registration.name}: its prefix names another handler")
            table[message_type] = handler
    return table


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
