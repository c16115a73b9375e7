"""Components: the parts of enact that bring their own configuration.

A component is a ``Component`` subclass, in the shape of Mopidy's
``Extension``: a name, the settings of its config section (with defaults and
checks), an environment check run at daemon start, and what it adds to the
daemon: actors, the wire requests it serves (their prefix is the
component's name), chat commands, CLI commands, metrics, a channel or a
runtime. Every part of enact is one: the daemon's own core, each feature,
each channel and each runtime.

They are all found the same way: through the ``enact.extensions``
entry-point group, each entry point naming a Component subclass or a factory
that returns an instance. Which components are built in is declared in one
place, the ``enact.extensions`` entry points in ``setup.cfg`` (the ``enact``
distribution's), loaded first; an installed package adds one the same way.
A broken extension stops the daemon at start with one line naming it. The
daemon's actors, the reserved names, the chat commands and the CLI's
commands are read from what loaded; nothing else lists them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from enact import config
from enact.config import Config, ConfigError, RuntimeSettings, Setting
from enact.entry_points import EntryPoint, entry_points
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.messages._registry import protocols
from enact.messages.common import Origin, chat_origin

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from enact.actors._asks import Asker
    from enact.actors.supervisor import ActorSpec
    from enact.budget.gate import BudgetGate
    from enact.channels import Channel
    from enact.commands import Command, CommandRegistry
    from enact.runtime import Runtime
    from enact.storage import DatabaseSchema

GROUP = "enact.extensions"
OWN_DISTRIBUTION = "enact"
"""The distribution whose entry points are enact's own components."""

RESERVED_NAMES = frozenset({"enact"})
"""The one word no component may take. Every other name a component may not
take is read from what loaded (``check``, ``component_actors``): another
component's name, a section of enact's own settings, the prefix of one of
enact's protocols it does not serve, an actor or a pool's family."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


WireHandler = Callable[[Any], object]
"""Serves one request type in the control connection's thread."""

Dispatch = Callable[[Any, Origin], object]
"""Routes one typed request as the control socket does (to the handler or the
actor its prefix names, answering a failure with ``control.Error``), stamped
with the given origin instead of ``human-cli``."""


class Service(Protocol):
    """A server a component runs beside the actors (the console's web
    server): started once the control socket is, stopped before it."""

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


class ComponentError(EnactError):
    """A component cannot be loaded or its environment is not usable; one line."""


@dataclass(frozen=True, slots=True, eq=False)
class DaemonParts:
    """What the daemon has made before the components add their actors."""

    settings: Config
    runtime: Runtime
    """The runtime ``runtime.adapter`` names, metered."""
    channels: Mapping[str, Channel]
    """The channels the daemon runs, by name."""
    origins: Mapping[str, Origin]
    """Each channel's origin, as its component vouches for it."""
    commands: CommandRegistry
    """Every component's chat commands and the owner's programs."""
    budget: BudgetGate = dataclasses.field(default_factory=lambda: _unlimited_gate())
    """The day's spending budget, as every runtime call and background job reads it (``enact.budget``)."""


def _unlimited_gate() -> BudgetGate:
    """A gate no budget limits, for parts made without a daemon's (a test's)."""
    from enact.budget.gate import UNLIMITED, BudgetGate
    from enact.clock import REAL_CLOCK

    return BudgetGate(UNLIMITED, REAL_CLOCK)


class Component:
    """Subclass it; set ``name`` and ``settings``, override what applies.

    The module that declares a component is imported by every CLI command
    (which reads ``cli``): it imports what its actors and commands need
    inside the methods that make them."""

    name: ClassVar[str] = ""
    settings: ClassVar[tuple[Setting, ...]] = ()
    sections: ClassVar[tuple[str, ...]] = ()
    """Config sections its keys may live in; empty means its own name only."""
    cli: ClassVar[Mapping[str, str]] = {}
    """The CLI commands it adds: command name -> ``module:attribute`` of a
    click command, imported only when that command runs."""

    def validate_environment(self, settings: Config) -> None:
        """Raise ComponentError (one line) if the daemon cannot use this
        component as configured: a missing binary, an unset token."""

    def actors(self, parts: DaemonParts) -> Sequence[ActorSpec]:
        """The actors it adds to the supervisor. An installed extension's are
        each named after it (``<name>`` or ``<name>:<part>``), so that its
        wire prefix reaches them; enact's own keep the names of their
        protocols (``inbox``, ``tasks``)."""
        return ()

    def schemas(self) -> Sequence[DatabaseSchema]:
        """The schema of each database its actors keep whose records changed
        layout since version 1: its current version and the step from each
        older one. A database not named here is at version 1. Read before
        the actors are made (a home newer than this enact is refused before
        anything is written), so it needs nothing of the daemon."""
        return ()

    def commands(self, registry: CommandRegistry) -> Sequence[Command]:
        """The chat commands it adds to ``registry`` (``/name`` in chat, a
        model's action, ``enact call commands.Run``); the registry is there for
        a command that lists the others (``/help``)."""
        return ()

    def metrics(self, registry: CollectorRegistry) -> None:
        """Create its metrics in the daemon's registry (each named
        ``enact_<...>``, every labelled series at 0 so that the first
        incident is an increase an alert sees); called once, before
        ``actors``, which hands them to the actors that count."""

    def handlers(self, settings: Config, ask: Asker) -> Mapping[type[Any], WireHandler]:
        """The wire requests it serves, each a registered request named
        ``<component name>.<Type>``; called once the actors exist."""
        return {}

    def services(self, settings: Config, dispatch: Dispatch) -> Sequence[Service]:
        """The servers it runs beside the actors, which reach them only by
        ``dispatch``: the requests the CLI sends, under an origin of their
        own. Called once the handlers are known; a service that cannot
        start (its address taken) says so in its own log and status, and
        the daemon runs on without it."""
        return ()


class ChannelComponent(Component):
    """A chat channel; the daemon starts it after the actors, stops it before."""

    polls_shared_account: ClassVar[bool] = True
    """Whether the channel fetches its events from an account that another
    host may answer too (a bot's): a home moved elsewhere never starts it,
    so one bot is not answered from two machines."""

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
    own: frozenset[str] = frozenset()
    """The names of enact's own among them."""

    def cli_commands(self) -> dict[str, str]:
        """Every CLI command: name -> ``module:attribute`` of its click command."""
        return {name: target for component in self.items for name, target in component.cli.items()}

    def chat_commands(self, registry: CommandRegistry) -> list[Command]:
        return [command for component in self.items for command in component.commands(registry)]

    def schemas(self) -> list[DatabaseSchema]:
        """Every component's declared database schemas; raises ComponentError
        for a database two components declare."""
        declared: dict[str, str] = {}
        schemas: list[DatabaseSchema] = []
        for component in self.items:
            for schema in component.schemas():
                if schema.name in declared:
                    raise ComponentError(f"component {component.name}: the schema of database {schema.name} "
                                         f"is already declared by {declared[schema.name]}")
                declared[schema.name] = component.name
                schemas.append(schema)
        return schemas

    def create_metrics(self, registry: CollectorRegistry) -> None:
        for component in self.items:
            component.metrics(registry)

    def settings(self) -> tuple[Setting, ...]:
        """Every key that exists, each component's in turn (``runtime.adapter``
        choosing among the installed runtimes)."""
        adapter = config.one_of(*sorted(self.runtimes()))
        declared = (dataclasses.replace(s, component=component.name)
                    for component in self.items for s in component.settings)
        return tuple(dataclasses.replace(s, check=adapter) if s.key == "runtime.adapter" else s for s in declared)

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


def load(extensions: Iterable[EntryPoint] | None = None) -> Components:
    """enact's own components, then every installed extension (or the given
    ``extensions`` in their place); raises ComponentError naming the first
    one that cannot be used."""
    found = entry_points(GROUP)
    own = [entry for entry in found if _is_own(entry)]
    if not own:
        raise ComponentError("enact's own components are not installed: install enact "
                             "(`make run` does: pip install -e .) rather than running it from a bare source tree")
    others = [entry for entry in found if not _is_own(entry)] if extensions is None else list(extensions)
    items = sorted((_load_entry(entry, own=True) for entry in own), key=_own_order)
    items.extend(_load_entry(entry, own=False) for entry in sorted(others, key=lambda e: e.name))
    components = Components(items=tuple(items), own=frozenset(entry.name for entry in own))
    check(components)
    return components


def _is_own(entry_point: EntryPoint) -> bool:
    return entry_point.distribution.lower() == OWN_DISTRIBUTION


def _own_order(component: Component) -> tuple[int, str]:
    """enact's own in a steady order: the core, the features, the channels,
    the runtimes (entry points come in no particular order)."""
    kind = 0 if component.name == "core" else 3 if isinstance(component, RuntimeComponent) else (
        2 if isinstance(component, ChannelComponent) else 1)
    return kind, component.name


def _load_entry(entry_point: EntryPoint, *, own: bool) -> Component:
    where = f"{'component' if own else 'extension'} {entry_point.name} ({entry_point.value})"
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
    """Names are valid and unique, no extension takes a section or protocol
    prefix of enact's own, every setting is well declared, lives in its
    component's sections and is declared once, and every CLI command has
    one component."""
    seen_names: set[str] = set()
    keys: dict[str, str] = {}
    variables: dict[str, str] = {}
    own = [component for component in components.items if component.name in components.own]
    own_sections = {section for component in own for section in component.sections or (component.name,)}
    taken_by_enact = RESERVED_NAMES | own_sections | (set(protocols()) - {component.name for component in own})
    cli_commands: dict[str, str] = {}
    for component in components.items:
        name = component.name
        if not _NAME.fullmatch(name):
            raise ComponentError(f"component {name!r}: a name is lower-case letters, digits and _ (at most 32)")
        if name in seen_names or (name not in components.own and name in taken_by_enact):
            raise ComponentError(f"component {name}: the name is already taken")
        seen_names.add(name)
        for command in component.cli:
            if command in cli_commands:
                raise ComponentError(f"component {name}: the CLI command {command!r} is {cli_commands[command]}'s")
            cli_commands[command] = name
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


def component_actors(installed: Components, parts: DaemonParts) -> list[ActorSpec]:
    """Every component's actors, enact's own first; raises ComponentError for
    an extension's actor not named after it, for an actor name or a pool's
    family taken twice, for an extension named like another component's
    actor or pool family, and for a database schema declared by a component
    none of whose actors keeps that database."""
    specs: list[ActorSpec] = []
    owner_of: dict[str, Component] = {}  # an actor's name or a pool's family -> its component
    for component in installed.items:
        extension = component.name not in installed.own
        component_specs = list(component.actors(parts))
        kept = {database for spec in component_specs for database in spec.databases}
        for schema in component.schemas():
            if schema.name not in kept:
                raise ComponentError(f"component {component.name}: it declares the schema of database "
                                     f"{schema.name}, which none of its actors keeps")
        for spec in component_specs:
            if extension and spec.name != component.name and not spec.name.startswith(f"{component.name}:"):
                raise ComponentError(f"component {component.name}: its actor {spec.name!r} must be named after it")
            for family in spec.families:
                if family in owner_of:
                    raise ComponentError(f"component {component.name}: the actor name {family!r} is already taken")
                owner_of[family] = component
            specs.append(spec)
    for component in installed.items:
        if owner_of.get(component.name, component) is not component:
            raise ComponentError(f"component {component.name}: the name is already taken")
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
