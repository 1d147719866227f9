"""Instants as users write them, the same for every time option (see "Times and durations"
in docs/reference/schedules.md):

- ``now``: the clock's instant (the database's where the command has a database);
- a duration with a sign: ``-2d`` that long before now, ``+2h`` that long after;
- a duration without a sign goes the way the option looks: back where it is in the past
  (a range's ends, ``--since``: ``2d`` is two days ago), ahead where it is in the future
  (``pause --until``, ``trigger --at``: ``2h`` is two hours from now); an option that
  looks both ways (``tick --now``) needs the sign;
- an ISO-8601 instant, ``2026-03-29T01:30:00Z``; without an offset it is read in ``zone``;
- a date, ``2026-03-29``: the start of that day, or its last instant where the option ends a
  range (``--to 2026-03-29`` includes the whole day).

Every instant lies between :data:`EARLIEST` and :data:`LATEST`: far inside what Python's
datetime (years 1 to 9999) and PostgreSQL can hold, so that no schedule arithmetic on it
overflows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Literal

from cronjobs.durations import looks_like_duration, parse_duration, shown
from cronjobs.errors import UsageError

EARLIEST = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)

# Which way a duration without a sign goes: back from now, ahead of it, or neither (the
# option looks both ways and needs a sign).
Towards = Literal["past", "future", "either"]
NOW = "now"

# The forms, as --help and the messages say them (one wording for every option).
FORMS: dict[Towards, str] = {
    "past": "now, a duration ago such as 2d, an instant such as 2026-03-29T01:30:00Z "
            "or a date such as 2026-03-29",
    "future": "now, a duration ahead such as 2h, an instant such as 2026-03-29T01:30:00Z "
              "or a date such as 2026-03-29",
    "either": "now, a duration ago or ahead such as -2d or +2h, an instant such as "
              "2026-03-29T01:30:00Z or a date such as 2026-03-29",
}


def parse_instant(
    text: str,
    *,
    option: str,
    now: Callable[[], dt.datetime] | None = None,
    towards: Towards = "past",
    zone: dt.tzinfo = dt.UTC,
    end: bool = False,
) -> dt.datetime:
    """Parse one time option into an aware UTC datetime, or raise a UsageError naming
    ``option``. ``now``: the clock that ``now`` and durations are read against (called
    only for them; without it, only instants and dates are taken). ``towards``: the way a
    duration without a sign goes. ``end``: a date means its last instant."""
    value = text.strip()
    relative = _relative(value, text, option, now, towards) if now is not None else None
    if relative is not None:
        return _within(relative, text, option)
    try:
        return _within(_parse(value, zone, end), text, option)
    except ValueError:
        forms = (FORMS[towards] if now is not None else
                 "an instant such as 2026-03-29T01:30:00Z or a date such as 2026-03-29")
        raise UsageError(f"invalid {option} {shown(text)}: use {forms}") from None
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00, which is in year 0 in UTC
        raise _out_of_range(text, option) from None


def _relative(value: str, text: str, option: str, now: Callable[[], dt.datetime],
              towards: Towards) -> dt.datetime | None:
    """``now`` or a duration from now; None when ``value`` is neither."""
    if value.lower() == NOW:
        return now()
    sign, bare = (value[0], value[1:]) if value[:1] in ("+", "-") else ("", value)
    if not looks_like_duration(bare):
        return None
    length = parse_duration(bare, option=option)
    if not sign and towards == "either":
        raise UsageError(f"invalid {option} {shown(text)}: say which way with a sign: "
                         f"-{bare} ({bare} ago) or +{bare} ({bare} ahead)")
    ahead = sign == "+" or (not sign and towards == "future")
    try:
        return now() + length if ahead else now() - length
    except OverflowError:
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
