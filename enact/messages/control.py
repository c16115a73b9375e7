"""The control protocol: what the CLI asks of the daemon as a whole."""

from __future__ import annotations

from dataclasses import field

from enact.frozen_dataclass import dataclass
from enact.messages._registry import Request, reply, request
from enact.messages.accounting import PurposeSpending
from enact.messages.budget import BudgetLine
from enact.messages.channel import ChannelState


@request("control.Status")
@dataclass(frozen=True, slots=True, kw_only=True)
class Status(Request["StatusReport"]):
    """Ask for the daemon's status report. Without ``brief`` (what every
    release before it sends: an empty body) the full report, in the shape
    those releases read: each actor's record and the storage."""

    brief: bool = False
    """Only what ``enact status`` prints: the actors by name, no records and
    no storage. Asked often (the CLI, the console, every wait for a daemon),
    so kept small; an older release refuses the field."""


EVERY_RELEASES_STATUS = b'{"type":"control.Status","body":{}}'
"""A full ``Status`` as every release asks and answers it: ``encode(Status())``
writes ``"brief": false``, which a release from before the field refuses (a
CLI or updater of this release talking to an older daemon)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorStatus:
    name: str
    alive: bool
    mailbox: int
    handled: int
    restarts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaVersion:
    database: str
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageStatus:
    path: str
    map_bytes: int
    used_bytes: int
    databases: int
    schemas: tuple[SchemaVersion, ...] = ()
    """Each database's recorded schema version, by name."""


@reply("control.StatusReport")
@dataclass(frozen=True, slots=True, kw_only=True)
class StatusReport:
    version: str
    pid: int
    home: str
    generation: int
    uptime_s: float
    metrics_addr: str
    actors: tuple[ActorStatus, ...] = ()
    """Each actor's mailbox, messages handled and restarts: left out by ``Status(brief=True)``."""
    storage: StorageStatus | None = None
    """The storage and its schema versions: left out by ``Status(brief=True)``."""
    actor_names: tuple[str, ...] = ()
    """Every actor of the daemon by name, running or not (``stopped``)."""
    stopped: tuple[str, ...] = ()
    """The actors that are not running."""
    restarts: dict[str, int] = field(default_factory=dict)
    """Each actor restarted since the daemon started, and how often."""
    waiting: dict[str, int] = field(default_factory=dict)
    """Each actor with messages waiting in its mailbox, and how many."""
    spending: tuple[PurposeSpending, ...] = ()
    """Tokens the runtime spent today (local time), by purpose."""
    channels: tuple[ChannelState, ...] = ()
    runtime: str = ""
    """The model runtime the daemon calls (``runtime.adapter``)."""
    confinement: str = ""
    """Whether tasks run confined here, and why not (``enact.tasks.confine.state_of``)."""
    revision: str = ""
    """The revision of enact the daemon was started from, read at its start (``enact._app.revision``); "" when
    it runs from neither a git checkout nor a release."""
    home_id: str = ""
    """The home's own id (``<home>/home-id``); an imported home gets a new one."""
    budget: tuple[BudgetLine, ...] = ()
    """Today's use against the budget (``enact.budget``): each purpose with a budget or with use, then the total."""
    budget_resets_at: float = 0.0
    """When the budget's day starts again."""


@request("control.Shutdown")
@dataclass(frozen=True, slots=True, kw_only=True)
class Shutdown(Request["ShuttingDown"]):
    """Stop the daemon gracefully (``enact daemon stop``)."""


@reply("control.ShuttingDown")
@dataclass(frozen=True, slots=True, kw_only=True)
class ShuttingDown:
    pid: int


@request("control.GetConfig")
@dataclass(frozen=True, slots=True, kw_only=True)
class GetConfig(Request["ConfigReport"]):
    """Ask for the configuration the daemon runs with (``enact config show``)."""


SettingValue = bool | int | float | str | list[str] | list[int]
"""A setting's value as shown (``enact.config.Config.shown_value``): a
secret is only "set", "unset" or the file it is read from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingRow:
    """One key as ``config show`` prints it, and where its value came from."""

    key: str
    value: SettingValue
    source: str
    doc: str
    component: str
    allowed: str


@reply("control.ConfigReport")
@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigReport:
    pid: int
    settings: tuple[SettingRow, ...]
    """Every key, secrets shown as ``SettingRow.value`` says: never their value."""


@reply("control.Error")
@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    """The request could not be handled; the connection closes after this."""

    message: str = field(default="")
