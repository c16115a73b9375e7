"""Every update and rollback attempt, as a journal under the home:
``<home>/updates/history.jsonl``, one JSON line per event, each written
and flushed to disk before the step it announces runs.

The process that drives an attempt writes it; the daemons it replaces
never do, so an attempt is recorded whole whichever daemon serves at its
end. An attempt whose driver died leaves no end: it reads as unfinished,
at its last step. The release serving the home is the one the last
finished attempt left serving.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from enact.errors import EnactError
from enact.update.releases import Release

UPDATES = "updates"
JOURNAL = "history.jsonl"
LOCK = "lock"

UPDATED = "updated"
"""The new release serves and ``current`` names it."""
ROLLED_BACK = "rolled_back"
"""The new release was started and did not hold; the old one serves again."""
FAILED = "failed"
"""The new release never started (its install or its doctor failed); the old one served throughout."""
REFUSED = "refused"
"""Nothing was done: the check said why."""
UNFINISHED = "unfinished"


class UpdateUnderWay(EnactError):
    """Another attempt holds the home's update lock."""


def updates_dir(home: Path) -> Path:
    return home / UPDATES


@dataclass(slots=True, kw_only=True)
class Attempt:
    """One attempt, read back from its journal lines."""

    id: str
    kind: str
    """``update`` or ``rollback``."""
    started_at: float
    origin: str
    from_release: Release
    to_revision: str
    steps: list[str] = field(default_factory=list)
    outcome: str = UNFINISHED
    reason: str = ""
    ended_at: float = 0.0
    serving: Release | None = None

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "started_at": self.started_at, "origin": self.origin,
                "from": self.from_release.as_record(), "to_revision": self.to_revision, "steps": self.steps,
                "outcome": self.outcome, "reason": self.reason, "ended_at": self.ended_at,
                "serving": None if self.serving is None else self.serving.as_record()}


class Journal:
    """The attempts of one home; ``record`` appends, ``attempts`` reads."""

    def __init__(self, home: Path) -> None:
        self.directory = updates_dir(home)
        self.path = self.directory / JOURNAL

    def log_of(self, attempt_id: str) -> Path:
        """Where an attempt's programs (git, pip, the doctor) write their output."""
        return self.directory / f"{attempt_id}.log"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Held for a whole attempt: one at a time per home."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.directory / LOCK, "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UpdateUnderWay(f"an update is already under way on this home ({_holder(lock)})") from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()}\n".encode())
            lock.flush()
            yield

    def start(self, *, kind: str, origin: str, from_release: Release, to_revision: str) -> str:
        attempt_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.record(attempt_id, "started", kind=kind, origin=origin, **{"from": from_release.as_record()},
                    to_revision=to_revision)
        return attempt_id

    def step(self, attempt_id: str, step: str) -> None:
        self.record(attempt_id, "step", step=step)

    def end(self, attempt_id: str, outcome: str, reason: str, serving: Release) -> None:
        self.record(attempt_id, "ended", outcome=outcome, reason=reason, serving=serving.as_record())

    def record(self, attempt_id: str, event: str, **fields: Any) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = json.dumps({"attempt": attempt_id, "event": event, "at": time.time(), **fields}) + "\n"
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, line.encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def attempts(self) -> list[Attempt]:
        """Every attempt in the order they started."""
        found: dict[str, Attempt] = {}
        for event in self._events():
            attempt_id = str(event.get("attempt", ""))
            match event.get("event"):
                case "started":
                    found[attempt_id] = Attempt(
                        id=attempt_id, kind=event["kind"], started_at=event["at"], origin=event["origin"],
                        from_release=Release.from_record(event["from"]), to_revision=event["to_revision"])
                case "step" if attempt_id in found:
                    found[attempt_id].steps.append(event["step"])
                case "ended" if attempt_id in found:
                    attempt = found[attempt_id]
                    attempt.outcome, attempt.reason, attempt.ended_at = event["outcome"], event["reason"], event["at"]
                    attempt.serving = Release.from_record(event["serving"])
        return list(found.values())

    def serving(self) -> Release | None:
        """The release the last finished attempt left serving; None before any."""
        ended = [attempt for attempt in self.attempts() if attempt.serving is not None]
        return ended[-1].serving if ended else None

    def previous(self) -> Release | None:
        """The release that served before the one serving now (what ``update
        rollback`` returns to); None when there was none."""
        serving = self.serving()
        if serving is None:
            return None
        for attempt in reversed(self.attempts()):
            if attempt.serving == serving and attempt.from_release != serving:
                return attempt.from_release
        return None

    def _events(self) -> Iterator[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            # A line cut short by a crash is the journal's last: skipped, as its step never ran.
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event


def _holder(lock: IO[bytes]) -> str:
    lock.seek(0)
    return lock.read().decode(errors="replace").strip() or "another process"
