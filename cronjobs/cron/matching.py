"""The matcher: the wall-clock minutes a schedule matches, walked forward or back.

It skips the months, days and hours that are not in their sets, so a search costs a few
microseconds. Like croniter's ``get_next`` and ``get_prev``, a search gives up after 50
years of wall-clock time without a match, and at the ends of the calendar.

Which days of a month match depends only on the month's length and the weekday of its
first day (``month_days``): the day extensions (``L``, ``L-N``, ``NW``, ``LW``, ``D#N``,
``DL``) are worked out here, per month, beside the plain values of the day fields, so that
every caller of the matcher (``next``, ``explain``, materialisation, catch-up) sees them
the same way. Every (length, first weekday) pair a month can have occurs in some year, which
makes ``fires`` exact."""

from __future__ import annotations

import calendar
import datetime as dt
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

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
    extras: DayExtras  # the day extensions, beside doms and dows

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of ``month`` that match, ascending."""
        return _month_days(self, year, month)


@dataclass(frozen=True)
class DayExtras:
    """The day extensions of an expression (Quartz's ``L``, ``W`` and ``#``; Debian's cron
    has none of them). Each one is a day of the month that depends on the month."""

    last: frozenset[int] = frozenset()  # day-of-month L-N: N days before the last (L: 0)
    nearest: frozenset[int] = frozenset()  # day-of-month NW: the weekday nearest day N
    last_weekday: bool = False  # day-of-month LW
    nth: frozenset[tuple[int, int]] = frozenset()  # day-of-week D#N: (weekday 0-6, N 1-5)
    last_of: frozenset[int] = frozenset()  # day-of-week DL: the last weekday D (0-6)

    def without_month_days(self) -> DayExtras:
        """These extensions less the day-of-month ones."""
        return replace(self, last=frozenset(), nearest=frozenset(), last_weekday=False)

    def without_week_days(self) -> DayExtras:
        """These extensions less the day-of-week ones."""
        return replace(self, nth=frozenset(), last_of=frozenset())

    def __bool__(self) -> bool:
        return bool(self.last or self.nearest or self.last_weekday or self.nth
                    or self.last_of)


NO_EXTRAS = DayExtras()


def nearest_weekday(day: int, length: int, first: int) -> int:
    """The weekday (Monday to Friday) nearest ``day`` in a month of ``length`` days whose
    first day falls on weekday ``first`` (Sunday is 0), never crossing into another month,
    as Quartz defines ``W``: a Saturday moves back to Friday, a Sunday on to Monday; a
    Saturday the 1st moves on to Monday the 3rd, a Sunday the last day back to Friday."""
    weekday = (first + day - 1) % 7
    if weekday == 6:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday
        return day + 1 if day < length else day - 2
    return day


@functools.lru_cache(maxsize=4096)
def month_days(doms: frozenset[int], dows: frozenset[int], extras: DayExtras, day_or: bool,
               length: int, first: int) -> tuple[int, ...]:
    """The matching days of a month of ``length`` days whose first day falls on weekday
    ``first`` (Sunday is 0), ascending. A day of the month the month does not have (31 in
    April, ``31W`` in April, ``L-30`` in February) matches nothing in it; so does the 5th
    Friday in a month with four."""
    by_date = {d for d in doms if d <= length}
    by_date.update(length - n for n in extras.last if length - n >= 1)
    by_date.update(nearest_weekday(n, length, first) for n in extras.nearest if n <= length)
    if extras.last_weekday:
        by_date.add(nearest_weekday(length, length, first))
    nth, last_of = extras.nth, extras.last_of
    matching = []
    for day in range(1, length + 1):
        weekday = (first + day - 1) % 7
        by_weekday = (weekday in dows or (weekday, (day + 6) // 7) in nth
                      or (weekday in last_of and day + 7 > length))
        if (day in by_date or by_weekday) if day_or else (day in by_date and by_weekday):
            matching.append(day)
    return tuple(matching)


@functools.lru_cache(maxsize=4096)
def _month_days(spec: Spec, year: int, month: int) -> tuple[int, ...]:
    monday_first, length = calendar.monthrange(year, month)
    return month_days(spec.doms, spec.dows, spec.extras, spec.day_or, length,
                      (monday_first + 1) % 7)


def month_shapes(months: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Every (length, weekday of the first day) that a month of ``months`` has in some year
    (all seven weekdays for each length: the Gregorian calendar gives every one)."""
    lengths = {calendar.monthrange(2001, m)[1] for m in months}  # not a leap year
    if 2 in months:
        lengths.add(29)
    for length in sorted(lengths):
        for first in range(7):
            yield length, first


# Every expression is checked with it, each H job with its own: few distinct answers.
@functools.lru_cache(maxsize=4096)
def fires(doms: frozenset[int], dows: frozenset[int], extras: DayExtras, day_or: bool,
          months: frozenset[int]) -> bool:
    """Whether these day fields match some day of some month of ``months`` in some year."""
    return any(month_days(doms, dows, extras, day_or, length, first)
               for length, first in month_shapes(months))


@functools.lru_cache(maxsize=8192)
def shared_spec(values: tuple[frozenset[int], ...], day_or: bool, wildcard: bool,
                extras: DayExtras = NO_EXTRAS) -> Spec:
    """The one Spec of these field values, day rule, DST class and day extensions."""
    minutes, hours, doms, months, dows = values
    return Spec(tuple(sorted(minutes)), tuple(sorted(hours)), doms, tuple(sorted(months)),
                 dows, day_or, wildcard, extras)


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
