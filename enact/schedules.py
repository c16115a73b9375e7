"""The one schedule grammar, and the due times it names.

Cron schedules (``enact cron add``, ``enact.tasks.scheduling``) and the evolve
schedule (``evolve.schedule``, ``enact.evolution.schedule``) are written the
same way, in one of three forms:

- ``every N<unit>``: an interval, the unit ``s``, ``m``, ``h`` or ``d``
  (``every 30m``, ``every 6h``, ``every 1d``), from 1 s to 366 days, counted
  in whole intervals from an anchor (when the schedule was added or first
  seen);
- ``daily HH:MM``: once a day at that local time;
- a five-field cron expression (``0 9 * * 1-5``) in local time, evaluated by
  ``croniter`` (imported when first needed: the CLI loads this module).

A leaf: the configuration checks ``evolve.schedule`` with it, the scheduler
and the evolution package run by it.
"""

from __future__ import annotations

import datetime
import re

from enact.errors import EnactError
from enact.frozen_dataclass import dataclass

MAX_SPEC = 200
"""The longest schedule text, in characters."""
UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
MIN_INTERVAL_S = 1
MAX_INTERVAL_S = 366 * 86_400
FORMS = "'every 30m', 'every 6h', 'every 1d', 'daily 09:00' (local time) or a cron expression such as '0 9 * * 1-5'"
"""The forms, as an error or a setting's check says them."""

_INTERVAL = re.compile(r"every\s+(\d+)\s*([smhd])", re.IGNORECASE)
_DAILY = re.compile(r"daily\s+(\d{1,2}):(\d{2})", re.IGNORECASE)


class ScheduleError(EnactError, ValueError):
    """A schedule that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedSchedule:
    """A schedule in one of the three forms."""

    spec: str
    """The normalised text (``every 6h``, ``daily 09:00``, ``0 9 * * 1-5``)."""
    interval_s: int = 0
    """Seconds between due times; 0 for a daily time or a cron expression."""
    hour: int = 0
    minute: int = 0
    cron: bool = False
    """``spec`` is a cron expression."""

    @property
    def daily(self) -> bool:
        return not self.interval_s and not self.cron


def parse(text: str) -> ParsedSchedule:
    """The schedule ``text`` names; ScheduleError says in one line what is wrong."""
    spec = " ".join(text.split())
    if not spec or len(spec) > MAX_SPEC:
        raise ScheduleError(f"a schedule is {FORMS}, at most {MAX_SPEC} characters, not {_clip(text)!r}")
    interval = _INTERVAL.fullmatch(spec)
    if interval is not None:
        count, unit = int(interval.group(1)), interval.group(2).lower()
        seconds = count * UNIT_S[unit]
        if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
            raise ScheduleError(f"an interval is between {MIN_INTERVAL_S} s and 366 days, not {spec!r}")
        return ParsedSchedule(spec=f"every {count}{unit}", interval_s=seconds)
    daily = _DAILY.fullmatch(spec)
    if daily is not None:
        hour, minute = int(daily.group(1)), int(daily.group(2))
        if hour > 23 or minute > 59:
            raise ScheduleError(f"{spec!r}: a daily time is HH:MM from 00:00 to 23:59")
        return ParsedSchedule(spec=f"daily {hour:02d}:{minute:02d}", hour=hour, minute=minute)
    if spec.lower().startswith("every"):
        raise ScheduleError(f"{spec!r}: an interval is 'every N' with a unit s, m, h or d (every 10m)")
    from croniter import croniter

    if len(spec.split()) != 5 or not croniter.is_valid(spec):
        raise ScheduleError(f"a schedule is {FORMS}, not {spec!r}")
    return ParsedSchedule(spec=spec, cron=True)


def finer_than_a_minute(spec: str) -> bool:
    """Whether ``spec``'s due times fall between whole minutes: an interval
    that is not a whole number of minutes (``every 10s``, ``every 90s``). A
    daily time and a cron expression name minutes. Cheap: it never loads
    croniter."""
    interval = _INTERVAL.fullmatch(" ".join(spec.split()))
    return interval is not None and int(interval.group(1)) * UNIT_S[interval.group(2).lower()] % 60 != 0


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _moment(when: float, tz: datetime.tzinfo | None) -> datetime.datetime:
    # Aware either way: croniter then counts in that zone's wall time.
    return datetime.datetime.fromtimestamp(when, tz) if tz is not None else \
        datetime.datetime.fromtimestamp(when).astimezone()


def _at_daily_time(schedule: ParsedSchedule, day: datetime.date, tz: datetime.tzinfo | None) -> float:
    moment = datetime.datetime.combine(day, datetime.time(schedule.hour, schedule.minute), tzinfo=tz)
    # A naive datetime is local time; timestamp() resolves it as the C library does.
    return moment.timestamp()


def _day_of(moment: float, tz: datetime.tzinfo | None) -> datetime.date:
    return datetime.datetime.fromtimestamp(moment, tz).date()


def next_due(schedule: ParsedSchedule, after: float, *, anchor: float,
             tz: datetime.tzinfo | None = None) -> float:
    """The first due time strictly after ``after``. An interval counts whole
    intervals from ``anchor``; a daily time and a cron expression are in
    ``tz`` (None: local time)."""
    if schedule.interval_s:
        periods = max(0, int((after - anchor) // schedule.interval_s)) + 1
        return anchor + periods * schedule.interval_s
    if schedule.cron:
        from croniter import croniter

        return float(croniter(schedule.spec, _moment(after, tz)).get_next(float))
    day = _day_of(after, tz)
    for offset in range(3):  # today, tomorrow, or (across a clock change) the day after
        due = _at_daily_time(schedule, day + datetime.timedelta(days=offset), tz)
        if due > after:
            return due
    raise ValueError(f"no due time after {after} for {schedule.spec}")


def latest_due(schedule: ParsedSchedule, now: float, *, since: float, anchor: float,
               tz: datetime.tzinfo | None = None) -> float | None:
    """The latest due time in (``since``, ``now``], None if none came: any
    number of due times missed (the daemon was down) coalesce into this one."""
    if schedule.interval_s:
        periods = int((now - anchor) // schedule.interval_s)
        due = anchor + periods * schedule.interval_s
        return due if periods >= 1 and due > since else None
    if schedule.cron:
        first = next_due(schedule, since, anchor=anchor, tz=tz)
        if first > now:
            return None
        # Straight to the latest: a long downtime on "* * * * *" must not step
        # through every minute it missed.
        from croniter import croniter

        return max(first, float(croniter(schedule.spec, _moment(now + 1, tz)).get_prev(float)))
    day = _day_of(now, tz)
    for offset in range(3):
        due = _at_daily_time(schedule, day - datetime.timedelta(days=offset), tz)
        if due <= now:
            return due if due > since else None
    return None
