"""The mark a home keeps once ``enact home export --move`` took it to
another host (``<home>/moved.json``): where it went and when. A daemon
started on a moved home refuses in one line naming where it went; with
``--force`` it runs, but never starts a channel that polls an account
another host may now answer (``ChannelComponent.polls_shared_account``)."""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import asdict
from pathlib import Path

import orjson

from enact.frozen_dataclass import dataclass

MOVED_NAME = "moved.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    archive: str
    """The archive the home was exported to, as the export wrote it."""
    moved_at: float
    new_home_id: str | None = None
    """The home id of the imported home, once known (the export cannot know it)."""

    def line(self, home: Path) -> str:
        when = datetime.datetime.fromtimestamp(self.moved_at, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        where = f"home id {self.new_home_id}, " if self.new_home_id else ""
        return (f"{home} was moved to another host on {when} ({where}archive {self.archive}); "
                "`enact daemon start --force` runs it here anyway, without its Telegram channel")


def mark_moved(home: Path, moved: Moved) -> None:
    """Written whole (a crash leaves the mark or none) and synced: the mark
    must outlive the export that made it."""
    draft = home / f".{MOVED_NAME}.{os.getpid()}"
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(orjson.dumps(asdict(moved), option=orjson.OPT_INDENT_2))
        file.flush()
        os.fsync(file.fileno())
    os.replace(draft, home / MOVED_NAME)


def moved_from(home: Path) -> Moved | None:
    """The home's mark, or None when it was not moved. A mark that does not
    parse still says the home moved: refusing is the safe reading."""
    try:
        raw = (home / MOVED_NAME).read_bytes()
    except FileNotFoundError:
        return None
    with contextlib.suppress(orjson.JSONDecodeError, TypeError, ValueError):
        data = orjson.loads(raw)
        return Moved(archive=str(data["archive"]), moved_at=float(data["moved_at"]),
                     new_home_id=data.get("new_home_id"))
    return Moved(archive=f"unknown ({home / MOVED_NAME} does not parse)", moved_at=(home / MOVED_NAME).stat().st_mtime)
