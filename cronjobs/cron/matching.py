"""The matcher: the wall-clock minutes a schedule matches, walked forward or back.

It skips the months, days and hours that are not in their sets, so a search costs a few
microseconds. Like croniter's ``get_next`` and ``get_prev``, a search gives up after 50
years of wall-clock time without a match, and at the ends of the calendar."""

from __future__ import annotations

import calendar
import datetime as dt
import functools
from collections.abc import Iterator
from dataclasses import dataclass

# croniter's bound, kept: a search gives up after 50 years of wall-clock time without a
# match (and at the ends of the calendar, years 1 and 9999).
SEARCH_YEARS = 50


@dataclass(frozen=True, eq=False)
class Spec:
    """A schedule as Debian's cron reads it: the values of each field, the day rule and the
    DST class. There is one object per distinct schedule (see ``shared_spec``), compared by
    identity, so that what is worked out for one job serves every job sharing its
    schedule, whatever its expression looked like or which name its H fields came from."""

    minutes: tuple[int, ...]  # ascending
    hours: tuple[int, ...]  # ascending
    doms: frozenset[int]
    months: tuple[int, ...]  # ascending
    dows: frozenset[int]  # 0-6, Sunday is 0
    day_or: bool  # a day matches when either day field does (else both must)
    wildcard: bool  # Debian: the minute or hour field starts with '*'

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of ``month`` that match, ascending."""
        return _month_days(self, year, month)


@functools.lru_cache(maxsize=4096)
def _month_days(spec: Spec, year: int, month: int) -> tuple[int, ...]:
    length = calendar.monthrange(year, month)[1]
    doms, dows = spec.doms, spec.dows
    weekday = dt.date(year, month, 1).isoweekday() - 1  # of the 0th day, Sunday is 0
    if spec.day_or:
        return tuple(d for d in range(1, length + 1)
                     if d in doms or (weekday + d) % 7 in dows)
    return tuple(d for d in range(1, length + 1)
                 if d in doms and (weekday + d) % 7 in dows)


@functools.lru_cache(maxsize=8192)
def shared_spec(values: tuple[frozenset[int], ...], day_or: bool, wildcard: bool) -> Spec:
    """The one Spec of these field values, day rule and DST class."""
    minutes, hours, doms, months, dows = values
    return Spec(tuple(sorted(minutes)), tuple(sorted(hours)), doms, tuple(sorted(months)),
                 dows, day_or, wildcard)


def walls(spec: Spec, start: dt.datetime, *, backward: bool = False
           ) -> Iterator[dt.datetime]:
    """The matching wall-clock minutes (naive) from the minute ``start`` on, or back from it
    with ``backward``; ``start`` itself included if it matches. Like croniter, a search
    gives up after 50 years without a match, and at the ends of the calendar."""
    return _walls_back(spec, start) if backward else _walls_on(spec, start)


def _walls_on(spec: Spec, start: dt.datetime) -> Iterator[dt.datetime]:
    # `at`: still on the start's own month, day and hour, so the fields below it begin
    # at the start's values; once past them, every field begins at its first value.
    year, at = start.year, True
    give_up = min(year + SEARCH_YEARS, dt.MAXYEAR)
    hours, minutes = spec.hours, spec.minutes
    while year <= give_up:
        for month in spec.months:
            if at:
                if month < start.month:
                    continue
                at = month == start.month
            for day in spec.days(year, month):
                if at:
                    if day < start.day:
                        continue
                    at = day == start.day
                for hour in hours:
                    if at:
                        if hour < start.hour:
                            continue
                        at = hour == start.hour
                    for minute in minutes:
                        if at and minute < start.minute:
                            continue
                        at = False
                        yield dt.datetime(year, month, day, hour, minute)
                        give_up = min(year + SEARCH_YEARS, dt.MAXYEAR)
                    at = False
                at = False
            at = False
        at = False
        year += 1


def _walls_back(spec: Spec, start: dt.datetime) -> Iterator[dt.datetime]:
    # The mirror image of _walls_on: every field walks down from the start's values, then
    # from its last value.
    year, at = start.year, True
    give_up = max(year - SEARCH_YEARS, dt.MINYEAR)
    hours, minutes = spec.hours[::-1], spec.minutes[::-1]
    months = spec.months[::-1]
    while year >= give_up:
        for month in months:
            if at:
                if month > start.month:
                    continue
                at = month == start.month
            for day in reversed(spec.days(year, month)):
                if at:
                    if day > start.day:
                        continue
                    at = day == start.day
                for hour in hours:
                    if at:
                        if hour > start.hour:
                            continue
                        at = hour == start.hour
                    for minute in minutes:
                        if at and minute > start.minute:
                            continue
                        at = False
                        yield dt.datetime(year, month, day, hour, minute)
                        give_up = max(year - SEARCH_YEARS, dt.MINYEAR)
                    at = False
                at = False
            at = False
        at = False
        year -= 1
