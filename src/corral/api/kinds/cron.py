"""Cron schedules, as a CronJob's ``schedule`` writes them (the syntax Kubernetes' cron library
reads): five fields — minute, hour, day of month, month, day of week — each ``*``, a number, a range
``a-b``, a list ``a,b``, a step ``*/n`` or ``a-b/n``, month and weekday names (``jan``, ``mon``);
``?`` as ``*``; and ``@yearly``, ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.
When both day fields are restricted, a day matching either runs (as cron does). Times are in a time
zone (the CronJob's ``timeZone``, an IANA name; UTC without one). No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["Schedule", "CronError", "parse", "zone"]

_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}), ("month", 1, 12, _MONTHS),
           ("day of week", 0, 6, _DAYS))
MAX_YEARS = 5  # a schedule with no time in five years (Feb 30) has none


class CronError(ValueError):
    """A schedule or time zone that cannot be read; the message says which part."""


def _number(text: str, names: dict[str, int], what: str) -> int:
    value = names.get(text.lower())
    if value is not None:
        return value
    if not text.isdigit():
        raise CronError(f"{what}: {text!r} is not a number")
    return int(text)


def _field(text: str, what: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    weekday = what == "day of week"
    top = 7 if weekday else high  # 7 is Sunday too
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = _number(step_text, {}, what) if step_text else 1
        if step < 1:
            raise CronError(f"{what}: a step must be at least 1")
        if body in ("*", "?"):
            start, end = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            start, end = _number(a, names, what), _number(b, names, what)
        else:
            start = _number(body, names, what)
            end = high if step_text else start
        if not low <= start <= end <= top:
            raise CronError(f"{what}: {part!r} is outside {low}-{high}")
        values.update(v % 7 if weekday else v for v in range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 Sunday … 6 Saturday
    any_day: bool  # day of month was *
    any_weekday: bool  # day of week was *

    def _day_matches(self, t: datetime) -> bool:
        dom, dow = t.day in self.days, (t.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next_after(self, after: datetime, tz: tzinfo = timezone.utc) -> datetime | None:
        """The first scheduled time strictly after ``after`` (aware), as an aware datetime in ``tz``;
        None when there is none within :data:`MAX_YEARS`."""
        t = after.astimezone(tz).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = t + timedelta(days=366 * MAX_YEARS)
        while t < limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
                continue
            if t.minute not in self.minutes:
                t += timedelta(minutes=1)
                continue
            # Wall-clock arithmetic across a DST change can land on a time that does not exist:
            # normalise through UTC, as the next run is a real instant.
            return t.astimezone(timezone.utc).astimezone(tz)
        return None


def parse(text: str) -> Schedule:
    """A schedule; raises :class:`CronError` naming the field that is wrong."""
    spec = _MACROS.get(text.strip().lower(), text.strip())
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise CronError("a time zone in the schedule is not supported: use spec.timeZone")
    parts = spec.split()
    if len(parts) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(parts)}: {text!r}")
    sets = [_field(p, what, low, high, names) for p, (what, low, high, names) in zip(parts, _FIELDS)]
    return Schedule(*sets, any_day=parts[2] in ("*", "?"), any_weekday=parts[4] in ("*", "?"))


def zone(name: str | None) -> tzinfo:
    """An IANA time zone (``Europe/Paris``); UTC for None or empty; raises :class:`CronError`."""
    if not name:
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r}") from None
