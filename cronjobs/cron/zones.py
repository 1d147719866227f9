"""Time zones, and how a wall-clock time exists in one: once, twice (clocks fall back)
or not at all (clocks spring forward)."""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo

from cronjobs.errors import ScheduleError

_MINUTE = dt.timedelta(minutes=1)
_ZERO = dt.timedelta(0)

SINGLE, REPEATED, SKIPPED = 0, 1, 2


def check_timezone(name: str) -> zoneinfo.ZoneInfo:
    """The zone called ``name``, or ScheduleError if there is no such IANA zone."""
    if isinstance(name, str) and name.strip() == name and name:
        try:
            return _zone(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ScheduleError(
        f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
    )


@functools.lru_cache(maxsize=1024)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    if name.lower() in ("localtime", "posixrules", "factory") or name.startswith("/"):
        raise ValueError(name)
    return zoneinfo.ZoneInfo(name)


def classify(
    wall: dt.datetime, zone: dt.tzinfo
) -> tuple[int, dt.datetime, dt.datetime]:
    """How the naive wall time ``wall`` exists in ``zone``.

    Returns (kind, a, b) with naive UTC values: for SINGLE a == b is the instant; for
    REPEATED a < b are the first and second occurrence; for SKIPPED the wall time does
    not exist (a > b are what the offsets before and after the gap would give).
    """
    before = wall.replace(tzinfo=zone, fold=0).utcoffset() or _ZERO
    after = wall.replace(tzinfo=zone, fold=1).utcoffset() or _ZERO
    first = wall - before
    if before == after:
        return SINGLE, first, first
    second = wall - after
    return (REPEATED if before > after else SKIPPED), first, second


def gap_end(wall: dt.datetime, zone: dt.tzinfo, length: dt.timedelta) -> dt.datetime:
    """The first instant after the gap containing the skipped wall time ``wall``: the
    instant of the first existing wall-clock minute after it (naive UTC)."""
    low, high = 0, -(-length // _MINUTE)  # minutes after `wall`: skipped / exists
    while high - low > 1:
        middle = (low + high) // 2
        if classify(wall + middle * _MINUTE, zone)[0] == SKIPPED:
            low = middle
        else:
            high = middle
    return classify(wall + high * _MINUTE, zone)[1]
