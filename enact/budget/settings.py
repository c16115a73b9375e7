"""The budget's settings (``budget``): a daily token limit for the total and
for each purpose a runtime call names (``enact.runtime.PURPOSES``), so a new
purpose has its key without a change here; when the day starts again; what a
conversation over budget gets."""

from __future__ import annotations

import re
from collections.abc import Mapping

from enact.config import Check, Config, Setting, between, one_of
from enact.frozen_dataclass import dataclass
from enact.runtime import PURPOSES

TOTAL = "total"
"""The limit over every purpose together."""
NOTICE = "notice"
REFUSE = "refuse"
MAX_TOKENS = 10**11

_RESET = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")


def _limit_key(name: str) -> str:
    return f"budget.daily_tokens.{name}"


SETTINGS: tuple[Setting, ...] = (
    Setting(_limit_key(TOTAL), int, 0, "Tokens all runtime calls together may spend a day; 0: unlimited",
            between(0, MAX_TOKENS)),
    *(Setting(_limit_key(purpose), int, 0, f"Tokens the runtime calls of purpose {purpose} may spend a day; "
              "0: unlimited", between(0, MAX_TOKENS)) for purpose in PURPOSES),
    Setting("budget.reset", str, "00:00", "When the budget's day starts again, HH:MM in the daemon's local time",
            Check("a time of day HH:MM (00:00 to 23:59)", lambda value: _RESET.fullmatch(value) is not None)),
    Setting("budget.conversation", str, NOTICE,
            "A conversation over budget: notice answers that the budget is spent, refuse ignores its messages "
            "(the owner's local CLI is always answered)", one_of(NOTICE, REFUSE)),
    Setting("budget.notify_to", str, "",
            "The conversation told once a day that a purpose's budget is spent (channel:id); empty: the first "
            "one chat.allowed_conversations names, else local:cli"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSettings:
    limits: Mapping[str, int]
    """Tokens a day by purpose, and ``total``; only the limited ones (above 0)."""
    reset_minute: int
    """Minutes after local midnight at which the day starts again."""
    conversation: str
    notify_to: str

    @property
    def limited(self) -> bool:
        return bool(self.limits)

    @classmethod
    def from_config(cls, config: Config) -> BudgetSettings:
        values = config.values
        prefix = _limit_key("")
        limits = {key[len(prefix):]: value for key, value in values.items()
                  if key.startswith(prefix) and value > 0}
        match = _RESET.fullmatch(values["budget.reset"])
        reset = int(match.group(1)) * 60 + int(match.group(2)) if match else 0
        return cls(limits=limits, reset_minute=reset, conversation=values["budget.conversation"],
                   notify_to=values["budget.notify_to"])
