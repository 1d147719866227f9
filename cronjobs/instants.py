"""Instants as users write them, the same for every time option (see "Times and durations"
in docs/reference/schedules.md):

- an ISO-8601 instant, ``2026-03-29T01:30:00Z``; without an offset it is read in ``zone``;
- a date, ``2026-03-29``: the start of that day, or its last instant where the option ends a
  range (``--to 2026-03-29`` includes the whole day);
- where the option starts a range, a duration back from now, ``2h`` (``now`` is the
  database's clock where the command has a database).

Every instant lies between :data:`EARLIEST` and :data:`LATEST`: far inside what Python's
datetime (years 1 to 9999) and PostgreSQL can hold, so that no schedule arithmetic on it
overflows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from cronjobs.durations import looks_like_duration, parse_duration, shown
from cronjobs.errors import UsageError

EARLIEST = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)


def parse_instant(
    text: str,
    *,
    option: str,
    zone: dt.tzinfo = dt.UTC,
    end: bool = False,
    now: Callable[[], dt.datetime] | None = None,
) -> dt.datetime:
    """Parse one time option into an aware UTC datetime, or raise a UsageError naming
    ``option``. ``end``: a date means its last instant. ``now``: the option starts a range,
    and a duration means that long before ``now()``."""
    value = text.strip()
    if now is not None and looks_like_duration(value):
        return _within(now() - parse_duration(value, option=option), text, option)
    try:
        return _within(_parse(value, zone, end), text, option)
    except ValueError:
        forms = ("an ISO-8601 instant such as 2026-03-29T01:30:00Z, a date such as 2026-03-29, "
                 "or a duration back from now such as 2h" if now is not None else
                 "an ISO-8601 instant such as 2026-03-29T01:30:00Z or a date such as 2026-03-29")
        raise UsageError(f"invalid {option} {shown(text)}: use {forms}") from None
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00, which is in year 0 in UTC
        raise _out_of_range(text, option) from None


def _parse(value: str, zone: dt.tzinfo, end: bool) -> dt.datetime:
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone)
        return parsed.astimezone(dt.UTC)
    if end:  # the day's last instant, wherever the next midnight falls in that zone
        following = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=zone)
        return following.astimezone(dt.UTC) - dt.timedelta(microseconds=1)
    return dt.datetime.combine(day, dt.time(), tzinfo=zone).astimezone(dt.UTC)


def _within(at: dt.datetime, text: str, option: str) -> dt.datetime:
    if not EARLIEST <= at <= LATEST:
        raise _out_of_range(text, option)
    return at


def _out_of_range(text: str, option: str) -> UsageError:
    return UsageError(f"invalid {option} {shown(text)}: must lie between "
                      f"{EARLIEST.date()} and {LATEST.date()} (UTC)")
