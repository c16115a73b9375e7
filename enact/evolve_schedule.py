"""The evolve schedule, as a plain value and rules: its grammar and its due times.

The schedule says when the evolve run comes due: ``every 6h`` / ``every 30m``
(counted from an anchor, the moment the schedule was first seen) or ``daily
09:00`` (the daemon's local time). ``every Ns`` is accepted too, so that tests
need not wait minutes. A leaf: the configuration checks ``evolve.schedule``
with it, the evolution package runs by it.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from enact.errors import EnactError

MAX_SPEC = 100
MAX_INTERVAL_S = 7 * 86_400
_UNIT_S = {"s": 1, "m": 60, "h": 3_600}
_INTERVAL = re.compile(r"every\s+(\d{1,7})\s*([smh])", re.IGNORECASE)
_DAILY = re.compile(r"daily\s+(\d{1,2}):(\d{2})", re.IGNORECASE)
FORMS = "'every 30m', 'every 6h' or 'daily 09:00' (local time)"


class ScheduleError(EnactError, ValueError):
    """A schedule that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvolveSchedule:
    """A parsed schedule: an interval in seconds, or a daily local time."""

    spec: str
    """The normalised text (``every 6h``, ``daily 09:00``)."""
    interval_s: int = 0
    """Seconds between runs; 0 for a daily schedule."""
    hour: int = 0
    minute: int = 0

    @property
    def daily(self) -> bool:
        return self.interval_s == 0


def parse_schedule(text: str) -> EvolveSchedule:
    """The schedule ``text`` names; ScheduleError says in one line what is wrong."""
    spec = " ".join(text.split()).lower()
    if not spec or len(spec) > MAX_SPEC:
        raise ScheduleError(f"an evolve schedule is {FORMS}, not {text!r}")
    interval = _INTERVAL.fullmatch(spec)
    if interval is not None:
        seconds = int(interval.group(1)) * _UNIT_S[interval.group(2)]
        if not 1 <= seconds <= MAX_INTERVAL_S:
            raise ScheduleError(f"an evolve interval is between 1 s and 7 days, not {text!r}")
        return EvolveSchedule(spec=f"every {interval.group(1).lstrip('0') or '0'}{interval.group(2)}",
                              interval_s=seconds)
    daily = _DAILY.fullmatch(spec)
    if daily is not None:
        hour, minute = int(daily.group(1)), int(daily.group(2))
        if hour > 23 or minute > 59:
            raise ScheduleError(f"{text!r}: a daily time is HH:MM from 00:00 to 23:59")
        return EvolveSchedule(spec=f"daily {hour:02d}:{minute:02d}", hour=hour, minute=minute)
    raise ScheduleError(f"an evolve schedule is {FORMS}, not {text!r}")


def _at_daily_time(schedule: EvolveSchedule, day: datetime.date, tz: datetime.tzinfo | None) -> float:
    moment = datetime.datetime.combine(day, datetime.time(schedule.hour, schedule.minute), tzinfo=tz)
    # A naive datetime is local time; timestamp() resolves it as the C library does.
    return moment.timestamp()


def _day_of(moment: float, tz: datetime.tzinfo | None) -> datetime.date:
    return datetime.datetime.fromtimestamp(moment, tz).date()


def next_due(schedule: EvolveSchedule, after: float, *, anchor: float,
             tz: datetime.tzinfo | None = None) -> float:
    """The first due time strictly after ``after``. An interval counts whole
    intervals from ``anchor``; a daily time is in ``tz`` (None: local time)."""
    if not schedule.daily:
        periods = max(0, int((after - anchor) // schedule.interval_s)) + 1
        return anchor + periods * schedule.interval_s
    day = _day_of(after, tz)
    for offset in range(3):  # today, tomorrow, or (across a clock change) the day after
        due = _at_daily_time(schedule, day + datetime.timedelta(days=offset), tz)
        if due > after:
            return due
    raise ValueError(f"no due time after {after} for {schedule.spec}")


def latest_due(schedule: EvolveSchedule, now: float, *, since: float, anchor: float,
               tz: datetime.tzinfo | None = None) -> float | None:
    """The latest due time in (``since``, ``now``], None if none came: any
    number of due times missed (the daemon was down) coalesce into this one."""
    if not schedule.daily:
        periods = int((now - anchor) // schedule.interval_s)
        due = anchor + periods * schedule.interval_s
        return due if periods >= 1 and due > since else None
    day = _day_of(now, tz)
    for offset in range(3):
        due = _at_daily_time(schedule, day - datetime.timedelta(days=offset), tz)
        if due <= now:
            return due if due > since else None
    return None
