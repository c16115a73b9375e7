"""Configuration: documented defaults, ``config.toml``, ``ENACT_*`` variables.

Precedence, lowest first: default, file, environment, command line. Every
key is declared once: the daemon's own in ``SETTINGS``, a feature's in its
package's ``settings`` module (``enact.chat.settings``), a component's by the
component (``enact.components``); anything else is an error at start-up that
names the key and where it came from.

Code reads values as typed settings (``DaemonSettings``, ``ChatSettings``),
each built once per configuration by ``Config.typed``, never as
``config["a.b"]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar, cast

from enact.addresses import ADDRESS_FORM, is_address
from enact.errors import EnactError
from enact.frozen_dataclass import dataclass
from enact.home import CONFIG_NAME


class ConfigError(EnactError, ValueError):
    """A bad configuration value; the message is one line naming key and source."""


@dataclass(frozen=True, slots=True)
class Check:
    """A value's allowed range: ``allowed`` reads after "must be" and in the
    configuration reference (docs/reference/configuration.md). A number's check also carries its bounds
    (``low``/``high``), which every duration and count must declare."""

    allowed: str
    accepts: Callable[[Any], bool]
    low: float | None = None
    high: float | None = None

    def __call__(self, value: Any) -> str | None:
        """Why ``value`` is out of range, or None."""
        return None if self.accepts(value) else f"must be {self.allowed}"


def between(low: float, high: float) -> Check:
    """A duration's or a count's range, both ends included. Every number has
    one: an unbounded ``1e308`` overflows whatever adds it to a clock."""
    return Check(f"between {low} and {high}", lambda value: low <= value <= high, low, high)


HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY
"""Upper bounds of durations, in seconds: far beyond any sensible value,
far below what overflows a deadline."""


def one_of(*choices: str) -> Check:
    return Check(f"one of {', '.join(choices)}", lambda value: value in choices)


_address = Check(ADDRESS_FORM, is_address)


LIST_FORMS = 'a TOML/JSON list such as ["a", "b"] or a comma-separated list such as a,b'
"""How a list-valued setting is written in an ENACT_* variable."""

_ANY_OF_KIND = {str: "any text", int: "any integer", float: "any number", bool: "true or false"}
_LIST_ITEMS = {str: "strings", int: "integers"}


CORE = "core"


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    kind: type[Any]
    default: Any
    doc: str
    check: Check | None = None
    env: str = ""
    item_type: type[Any] = str  # for list settings
    component: str = CORE
    """Who declares it: ``core`` (the daemon itself) or a component's name."""
    secret: bool = False
    """A credential: read from the environment only, shown as set/unset."""
    read_from: str = ""
    """A secret's fallback: the key of a setting naming a file it is read
    from when unset, which ``config show`` names instead of "unset"."""

    @property
    def env_name(self) -> str:
        return self.env or "ENACT_" + self.key.upper().replace(".", "_")

    @property
    def allowed(self) -> str:
        """The allowed values in words, as the configuration reference gives them."""
        if self.check is not None:
            return self.check.allowed
        if self.kind is list:
            return f"a list of {_LIST_ITEMS[self.item_type]}"
        return _ANY_OF_KIND[self.kind]


SETTINGS: tuple[Setting, ...] = (
    Setting("daemon.metrics_addr", str, "127.0.0.1:9464", "Prometheus endpoint; port 0 picks a free port", _address),
    Setting("daemon.workers", int, 2, "Task workers in the pool; 0: none in this daemon",
            between(0, 64)),
    Setting("daemon.log_level", str, "info", "Log level", one_of("debug", "info", "warning", "error")),
    Setting("daemon.shutdown_timeout_s", float, 10.0, "How long in-flight messages may take at stop",
            between(0, HOUR)),
    Setting("daemon.takeover_wait_s", float, 10.0,
            "How long a daemon taking over waits for the old one to let go of the metrics address",
            between(0.1, HOUR)),
    Setting("daemon.command_server", bool, True,
            "Run command-line commands in a warm process beside the daemon (`cli.sock`)"),
    Setting("daemon.one_cpu", bool, True,
            "Run the daemon's own threads on one CPU, batch-scheduled (the programs it starts are ordinary processes): "
            "fewer and cheaper hand-offs between threads; off: the kernel places them"),
    Setting("supervisor.max_restarts", int, 5, "Restarts of one actor allowed within the window",
            between(1, 1000)),
    Setting("supervisor.restart_window_s", float, 60.0, "The window for max_restarts", between(1, DAY)),
    Setting("storage.map_size_mb", int, 64, "Initial LMDB map size; it grows on demand", between(1, 1 << 20)),
    Setting("control.idle_timeout_s", float, 30.0, "Idle control connections are closed after this",
            between(0.1, DAY)),
    Setting("control.request_timeout_s", float, 120.0, "Longest wait for an actor's reply", between(0.1, DAY)),
    # Its choices are the installed runtime components: enact.components fills them in.
    Setting("runtime.adapter", str, "scripted", "The model runtime"),
    Setting("runtime.timeout_s", float, 600.0, "Timeout of one runtime call", between(0.1, DAY)),
    Setting("runtime.prompt_version", int, 1, "Sessions started under another version are not resumed",
            between(1, 1_000_000)),
    Setting("runtime.allow_full_access", bool, False, "Whether a runtime call may run without a sandbox"),
)
"""The daemon's own settings; each feature and component declares its own."""


class TypedSettings(Protocol):
    """A frozen value of some keys, built from a configuration by its class."""

    @classmethod
    def from_config(cls, config: Config) -> Self: ...


T = TypeVar("T", bound=TypedSettings)


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSettings:
    """The daemon's own sections: ``daemon``, ``supervisor``, ``storage``, ``control``."""

    metrics_addr: str
    workers: int
    log_level: str
    shutdown_timeout_s: float
    takeover_wait_s: float
    command_server: bool
    one_cpu: bool
    max_restarts: int
    restart_window_s: float
    map_size_mb: int
    idle_timeout_s: float
    request_timeout_s: float

    @classmethod
    def from_config(cls, config: Config) -> DaemonSettings:
        values = config.values
        return cls(
            metrics_addr=values["daemon.metrics_addr"], workers=values["daemon.workers"],
            log_level=values["daemon.log_level"], shutdown_timeout_s=values["daemon.shutdown_timeout_s"],
            takeover_wait_s=values["daemon.takeover_wait_s"], command_server=values["daemon.command_server"],
            one_cpu=values["daemon.one_cpu"], max_restarts=values["supervisor.max_restarts"],
            restart_window_s=values["supervisor.restart_window_s"], map_size_mb=values["storage.map_size_mb"],
            idle_timeout_s=values["control.idle_timeout_s"], request_timeout_s=values["control.request_timeout_s"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSettings:
    """How the daemon calls its model runtime (``runtime``); the adapter's own
    keys are its component's."""

    adapter: str
    timeout_s: float
    prompt_version: int
    allow_full_access: bool

    @classmethod
    def from_config(cls, config: Config) -> RuntimeSettings:
        values = config.values
        return cls(adapter=values["runtime.adapter"], timeout_s=values["runtime.timeout_s"],
                   prompt_version=values["runtime.prompt_version"],
                   allow_full_access=values["runtime.allow_full_access"])

_NOT_SETTINGS = frozenset({"ENACT_HOME", "ENACT_COMMAND_SERVER"})
"""ENACT_* variables that are not configuration keys: the home, and the CLI's
switch for the command server (``enact.cli._handoff.DISABLE_VARIABLE``)."""

SOURCES = ("default", "file", "environment", "command line")


@dataclass(frozen=True, slots=True)
class Config:
    home: Path
    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    settings: tuple[Setting, ...] = SETTINGS
    _typed: dict[type[Any], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def typed(self, kind: type[T]) -> T:
        """``kind`` built from this configuration on first use, then shared:
        whoever holds the configuration reads the same value."""
        built = self._typed.get(kind)
        if built is None:
            # Two threads may both build it; setdefault keeps the first for all.
            built = self._typed.setdefault(kind, kind.from_config(self))
        return cast(T, built)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str) -> Any:
        return self.values[key]

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "key": s.key, "value": self.shown_value(s), "source": self.sources[s.key],
                "doc": s.doc, "component": s.component, "allowed": s.allowed,
            }
            for s in self.settings
        ]

    def shown_value(self, setting: Setting) -> Any:
        """What may be shown of a value: a secret only says whether it is set
        (its row's source says from where), or the setting naming the file
        it is read from instead (never what the file holds)."""
        value = self.values[setting.key]
        if not setting.secret:
            return value
        if not value and self.values.get(setting.read_from):
            return f"from {setting.read_from}"
        return "set" if value else "unset"


def load(
    home: Path,
    *,
    environ: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Any] | None = None,
    settings: Sequence[Setting] = SETTINGS,
) -> Config:
    """Read and validate the effective configuration; raises ConfigError.

    ``settings`` are the keys that exist: the daemon's own by default, plus
    its components' when the daemon or ``config show`` loads them."""
    by_key = {s.key: s for s in settings}
    by_env = {s.env_name: s for s in settings}
    values = {s.key: s.default for s in settings}
    sources = {s.key: "default" for s in settings}
    path = home / CONFIG_NAME
    if path.exists():
        for key, value in _read_file(path).items():
            where = f"{path}"
            setting = by_key.get(key)
            if setting is None:
                raise ConfigError(f"unknown configuration key {key!r} in {where}{_did_you_mean(key, by_key, repr)}")
            if setting.secret:
                raise ConfigError(f"{key} in {where}: a secret is not read from the config file; "
                                  f"set {setting.env_name} instead")
            values[key] = _validate(setting, value, where)
            sources[key] = "file"
    for name, raw in environ.items():
        if not name.startswith("ENACT_") or name in _NOT_SETTINGS:
            continue
        setting = by_env.get(name)
        if setting is None:
            raise ConfigError(f"unknown configuration variable {name} in the environment"
                              f"{_did_you_mean(name, by_env, str)}")
        where = f"environment variable {name}"
        values[setting.key] = _validate(setting, _from_text(setting, raw, where), where)
        sources[setting.key] = "environment"
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        setting = by_key[key]
        values[key] = _validate(setting, value, "the command line")
        sources[key] = "command line"
    return Config(home=home, values=values, sources=sources, settings=tuple(settings))


def _did_you_mean(name: str, known: Iterable[str], shown: Callable[[str], str]) -> str:
    """The nearest known name (written as ``shown`` writes it) as the end of
    an error line, or "" if none is near."""
    import difflib

    nearest = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {shown(nearest[0])}?" if nearest else ""


def _read_file(path: Path) -> dict[str, Any]:
    import tomllib  # here: every CLI command imports this module (the components' keys), few read a file

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    flat: dict[str, Any] = {}
    for section, table in document.items():
        if not isinstance(table, dict):
            raise ConfigError(f"unknown configuration key {section!r} in {path} (settings live in sections)")
        _flatten(section, table, flat)
    return flat


def _flatten(prefix: str, table: dict[str, Any], flat: dict[str, Any]) -> None:
    """``[channels.telegram]`` nests a table in a table: its keys are
    ``channels.telegram.<name>``. No setting's value is itself a table."""
    for name, value in table.items():
        if isinstance(value, dict):
            _flatten(f"{prefix}.{name}", value, flat)
        else:
            flat[f"{prefix}.{name}"] = value


def _from_text(setting: Setting, raw: str, where: str) -> Any:
    try:
        if setting.kind is bool:
            lowered = raw.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes")
        if setting.kind is int:
            return int(raw)
        if setting.kind is float:
            return float(raw)
        if setting.kind is list:
            return _list_from_text(setting, raw, where)
    except ConfigError:
        raise
    except ValueError:
        raise ConfigError(f"{setting.key} from {where}: expected {setting.kind.__name__}, got {raw!r}") from None
    return raw


def _list_from_text(setting: Setting, raw: str, where: str) -> list[Any]:
    """A TOML/JSON list, or comma-separated items; anything that looks like a
    botched list (brackets, quotes) is refused rather than split into garbage."""
    text = raw.strip()
    if text.startswith("["):
        import tomllib

        try:
            value = tomllib.loads(f"value = {text}")["value"]
        except tomllib.TOMLDecodeError:
            value = None
        if not isinstance(value, list):
            raise ConfigError(f"{setting.key} from {where}: expected {LIST_FORMS}, got {raw!r}")
        return value
    items = [item.strip() for item in text.split(",") if item.strip()]
    if any(mark in item for item in items for mark in "[]\"'"):
        raise ConfigError(f"{setting.key} from {where}: expected {LIST_FORMS}, got {raw!r}")
    return items


def _validate(setting: Setting, value: Any, where: str) -> Any:
    value, problem = checked(setting, value)
    if problem:
        raise ConfigError(f"{setting.key} from {where}: {problem}")
    return value


def checked(setting: Setting, value: Any) -> tuple[Any, str]:
    """``value`` as the setting's kind, and "" or why it is refused (after
    "KEY from WHERE: "). Files other than config.toml (commands.toml,
    .enact.toml) check their numbers against a Setting through this too."""
    expected = setting.kind
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > 1 << 1000:  # float() would raise OverflowError
            return value, f"must be {setting.allowed}, got {value!r}"
        value = float(value)
    if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
        return value, f"expected {expected.__name__}, got {type(value).__name__} {value!r}"
    if expected is list and not all(isinstance(item, setting.item_type) for item in value):
        return value, f"expected {setting.allowed}, got {value!r}"
    if setting.check is not None:
        problem = setting.check(value)  # a range refuses inf and nan too
        if problem:
            return value, f"{problem}, got {value!r}"
    return value, ""


def check_declaration(setting: Setting) -> None:
    """A setting declared by a component must be one this module can read:
    a ``section.name`` (or ``section.table.name``) key, a supported kind and
    a default its own check accepts. Raises ConfigError naming the key."""
    parts = setting.key.split(".")
    if not 2 <= len(parts) <= 3 or not all(parts):
        raise ConfigError(f"setting {setting.key!r} must be named 'section.name' or 'section.table.name'")
    if setting.kind not in _ANY_OF_KIND and setting.kind is not list:
        raise ConfigError(f"setting {setting.key} has a kind enact cannot read: {setting.kind!r}")
    if setting.kind is list and setting.item_type not in _LIST_ITEMS:
        raise ConfigError(f"setting {setting.key} is a list of a kind enact cannot read: {setting.item_type!r}")
    if setting.kind in (int, float) and (setting.check is None or setting.check.low is None
                                         or setting.check.high is None):
        raise ConfigError(f"setting {setting.key} is a number without a range: declare it with between()")
    if not setting.doc:
        raise ConfigError(f"setting {setting.key} has no documentation")
    _validate(setting, setting.default, "its declared default")
