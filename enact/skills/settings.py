"""The skills' settings (``skills``): the limits a skill folder is checked
against, how long learning one may take, and when an installed skill
becomes a removal candidate."""

from __future__ import annotations

from enact.config import Config, Setting, between
from enact.frozen_dataclass import dataclass

SETTINGS: tuple[Setting, ...] = (
    Setting("skills.max_files", int, 50, "Files one skill folder may hold", between(1, 1000)),
    Setting("skills.max_bytes", int, 512 * 1024, "Bytes one skill folder may hold in all", between(1024, 64 << 20)),
    Setting("skills.max_file_bytes", int, 128 * 1024, "Bytes one file of a skill may hold", between(256, 64 << 20)),
    Setting("skills.learn_timeout_s", float, 900.0,
            "Longest `enact learn` (or /learn) takes to fetch a skill and have it assessed; the request waits "
            "that long plus control.request_timeout_s", between(10, 86_400)),
    Setting("skills.unused_days", float, 30.0,
            "Days an installed skill may go unused (since its installation or last use) before its removal "
            "is proposed", between(1, 3650)),
    Setting("skills.failures_to_remove", int, 3,
            "Uses in a row, each followed by a failed turn or task, after which a skill's removal is proposed",
            between(1, 100)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLimits:
    max_files: int = 50
    max_bytes: int = 512 * 1024
    max_file_bytes: int = 128 * 1024

    @classmethod
    def from_config(cls, config: Config) -> SkillLimits:
        values = config.values
        return cls(max_files=values["skills.max_files"], max_bytes=values["skills.max_bytes"],
                   max_file_bytes=values["skills.max_file_bytes"])


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovalRule:
    unused_days: float = 30.0
    failures: int = 3

    @classmethod
    def from_config(cls, config: Config) -> RemovalRule:
        return cls(unused_days=config.values["skills.unused_days"],
                   failures=config.values["skills.failures_to_remove"])


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnSettings:
    timeout_s: float = 900.0
    """From the start of the fetch to the end of the assessment's model call."""

    @classmethod
    def from_config(cls, config: Config) -> LearnSettings:
        return cls(timeout_s=config.values["skills.learn_timeout_s"])
