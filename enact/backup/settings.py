"""The backup feature's settings (``backup``): its keys, their checks, and
the typed value the CLI and the backup actor read."""

from __future__ import annotations

from pathlib import Path

from enact.config import Check, Config, Setting, between
from enact.frozen_dataclass import dataclass
from enact.schedules import FORMS as SCHEDULE_FORMS
from enact.schedules import ScheduleError, parse

OFF = "off"
DEFAULT_DIR = "backups"
"""Under the home, when ``backup.dir`` is empty."""


def _is_schedule_or_off(value: str) -> bool:
    if value == OFF:
        return True
    try:
        parse(value)
    except ScheduleError:
        return False
    return True


SETTINGS: tuple[Setting, ...] = (
    Setting("backup.keep", int, 7, "Backups kept in backup.dir; older ones are deleted after each backup",
            between(1, 10_000)),
    Setting("backup.schedule", str, OFF, "When a scheduled backup is due; off: never",
            Check(f"off, or {SCHEDULE_FORMS}", _is_schedule_or_off)),
    Setting("backup.dir", str, "", "Where backups are written (default: <home>/backups)"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupSettings:
    keep: int
    schedule: str
    """``off``, or a schedule ``enact.schedules.parse`` reads."""
    directory: Path

    @property
    def scheduled(self) -> bool:
        return self.schedule != OFF

    @classmethod
    def from_config(cls, config: Config) -> BackupSettings:
        values = config.values
        written = values["backup.dir"]
        directory = Path(written).expanduser() if written else config.home / DEFAULT_DIR
        return cls(keep=values["backup.keep"], schedule=values["backup.schedule"], directory=directory)
