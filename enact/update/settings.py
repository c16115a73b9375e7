"""Self-update's settings (``update``): its keys, and the typed value the
updater reads."""

from __future__ import annotations

from enact.config import Config, Setting, between
from enact.frozen_dataclass import dataclass

SETTINGS: tuple[Setting, ...] = (
    Setting("update.repository", str, "",
            "The git repository enact updates itself from; empty: the checkout enact runs from, when it is one"),
    Setting("update.branch", str, "", "The branch whose head is the authoritative revision; empty: the "
            "repository's checked-out branch"),
    Setting("update.ready_timeout_s", float, 60.0,
            "How long a new release's daemon has to answer before the old release takes the home back",
            between(1, 3600)),
    Setting("update.probation_s", float, 30.0,
            "A new release's daemon that exits within this after its canary is rolled back", between(0, 86_400)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateSettings:
    repository: str
    """"": the checkout of the running package (``enact.tasks.repositories.own_checkout``)."""
    branch: str
    """"": the repository's checked-out branch."""
    ready_timeout_s: float
    probation_s: float

    @classmethod
    def from_config(cls, config: Config) -> UpdateSettings:
        values = config.values
        return cls(repository=values["update.repository"], branch=values["update.branch"],
                   ready_timeout_s=values["update.ready_timeout_s"], probation_s=values["update.probation_s"])
