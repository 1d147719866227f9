"""Cron expressions and time zones: when a job's slots fall.

cronjobs reads schedules the way **Debian's cron** does (Vixie cron with Debian's
daylight-saving patch), evaluated on the wall clock of the job's IANA time zone.

Syntax
------
Five fields, ``minute hour day-of-month month day-of-week``:

* minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or ``jan``-``dec``,
  day-of-week 0-7 or ``sun``-``sat`` (0 and 7 are both Sunday); names are
  case-insensitive;
* each field is ``*``, a value, a range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n``
  (``a/n`` means ``a-max/n``), or a comma-separated list of those;
* when both day fields are restricted (neither starts with ``*``) a day matches if
  *either* matches: ``0 0 1 * mon`` runs on the 1st and on every Monday. When one of
  them starts with ``*`` both must match, so ``0 0 */2 * mon`` runs on Mondays that
  fall on an odd day of the month (Debian checks for a leading ``*``, not for "every");
* macros ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
  ``@hourly`` stand for ``0 0 1 1 *``, ``0 0 1 1 *``, ``0 0 1 * *``, ``0 0 * * 0``,
  ``0 0 * * *``, ``0 0 * * *`` and ``0 * * * *``;
* Jenkins-style ``H`` (a whole field: ``H``, ``H/15``, ``H(0-29)``, ``H(0-29)/10``)
  stands for a value derived from the job's name, so that jobs written ``H * * * *``
  spread over the hour while each one keeps the same minute (croniter's hash of the
  name and the field, so the fields vary independently). A bare ``H`` in the
  day-of-month field picks from 1-28, so such a job runs every month. For the rules
  below ``H`` counts as a fixed value (it does not start with ``*``).

There are no seconds or year fields (the tick runs once a minute), no ``@reboot``, and
no ``L``, ``W``, ``#`` or ``?``: Debian's cron has none of them. A schedule that can
never fire (``0 0 30 2 *``) is rejected.

Daylight-saving time
--------------------
Like Debian's cron, a job is either a *wildcard* job, whose minute or hour field starts
with ``*`` (``* 2 * * *``, ``*/15 * * * *``, ``0 * * * *``, ``0 */2 * * *``,
``@hourly``), or a *fixed-time* job: every other job (``30 2 * * *``, ``0 1-3 * * *``,
``0-59 0-23 * * *``, ``0,* 2 * * *``, ``@daily``). Only the leading character counts,
as in Debian.

* A **wildcard** job follows the clock. Its slots are the instants at which the zone's
  wall clock shows a matching minute. When the clocks fall back it runs in both
  copies of the repeated hour: ``0 * * * *`` in Europe/Berlin runs at 02:00 CEST and
  again at 02:00 CET on the last Sunday of October. When they spring forward nothing
  is invented for the skipped hour: on the last Sunday of March it runs at 01:00 CET
  and then at 03:00 CEST, not at 02:00.
* A **fixed-time** job runs once for each matching wall-clock time, on the first
  occurrence when that time happens twice: ``30 2 * * *`` in Europe/Berlin runs once on
  the fall-back night, at 02:30 CEST (00:30 UTC), not again at 02:30 CET. A matching
  time that the clock skips runs right after the gap, at the first instant of the new
  offset: ``30 2 * * *`` runs at 03:00 CEST (01:00 UTC) on the spring-forward day.
  Several skipped times collapse into that one run (``0,30 2 * * *`` runs once at
  03:00), and a slot at the end of the gap is that same run, not a second one
  (``0 2,3 * * *`` runs once, at 03:00 CEST).
* Debian's cron catches up only after jumps shorter than three hours, taking longer ones
  for a reset clock. cronjobs knows a gap comes from the zone's rules, so it treats every
  gap alike: when Pacific/Apia skipped 30 December 2011, a ``0 12 * * *`` job ran once,
  at the first instant of 31 December.

Every function takes and returns aware datetimes; slots come back in UTC, strictly
increasing, each instant at most once. Naive datetimes are a programming error
(``ValueError``).

Matching, and croniter
----------------------
Validation and matching are the module's own. Validation reads each field the way
Debian's cron does, naming the field in its error messages, and rejects anything beyond
Debian's syntax (seconds and year fields, ``L``, ``W``, ``#``, ``?``, ``R``). What it
yields, the set of values of each field and the day rule, is what a small matcher walks
to find the matching wall-clock minutes, forward or back: it skips the months, days and
hours that are not in their sets, so a search costs a few microseconds. Like croniter's
``get_next`` and ``get_prev``, a search gives up after 50 years of wall-clock time without
a match. This module then maps those wall times to instants with the daylight-saving
rules above.

croniter is the project's cron library, and this is the only module that imports it. It
expands ``H`` fields (its hash of the job's name), and it is the oracle the tests check
the matcher against. Its own time-zone iteration is not used, because it departs from
the rules above: given an aware start it runs ``30 2 * * *`` twice on the fall-back night
in Europe/Berlin and invents a 03:00 run of ``*/30 2 * * *`` for the hour the clock
skips.

For the tests, each compiled expression also carries the expression croniter reads as
Debian's cron reads the original. Where croniter would read an expression differently,
that text is corrected:

1. **Which day rule applies.** croniter ORs the two day fields whenever both are
   restricted (by default, ``day_or=True``), so it would read ``0 0 */2 * mon`` as "odd
   days or Mondays". Debian ORs only when neither day field starts with ``*``; croniter
   is told ``day_or`` from that rule.
2. **A day field that lists every day.** croniter turns such a field into ``*`` when the
   other day field contains a ``*`` anywhere, and then ANDs, so ``0 0 1-31 * 1,*/2``
   would run on some weekdays only; Debian ORs and runs it every day. With OR and a
   field that matches every day, both day fields become ``*`` (for the matcher too).
3. **A day of the month that none of the months has, under OR** (``0 0 30 2 mon``).
   The day-of-month drops out (``*``, AND), leaving the weekday to decide, which is what
   OR means here (for the matcher too; croniter would search 50 years for a 30 February
   on every step).
4. **Single-value ranges.** croniter reads ``a-a`` as the whole cycle: ``5-5`` as ``*``,
   ``5-5/3`` as ``*/3``, ``jan-jan`` as every month. Debian reads the one value: ``a``.
5. **``a/n`` in day-of-week** stops at 6 (Saturday) in croniter and at 7 (Sunday again)
   in Debian: ``mon/2`` is Monday, Wednesday, Friday and Sunday. Written ``a-7/n``,
   which croniter reads as Debian does.
6. **Macros and ``H``.** Macros are expanded here (given a hash key croniter reads
   ``@daily`` as a hashed time). ``H`` fields are expanded one field at a time, each
   with its own key (see above), and written as the list of their values.

The tests check that croniter reads that text field by field as the validation does, and
that its ``get_next`` and ``get_prev`` find the same wall-clock minutes as the matcher.

Sharing work
------------
An expression is compiled once per expression and job name (the name matters only for
``H``), into a schedule that is shared: every job whose fields come out the same (``H``
jobs whose names hash alike, ``*/30`` and ``0,30``) gets the same compiled object. Each
process remembers the last answers of ``next_after`` and ``latest_at_or_before`` for a
compiled schedule, a zone and an instant (a bounded cache), so jobs sharing a schedule,
a zone and a cursor are worked out once.

Searching backwards
-------------------
``Schedule.latest_at_or_before`` walks the matching wall times back, giving up after 50
years of wall-clock time without a match, as croniter's ``get_prev`` does. Every accepted
schedule fires at least once every 40 years (the longest wait is for a 29 February on a
given weekday across 2100), so ``None`` only comes back when there is no slot at all
before the instant: near year 1.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import importlib
import itertools
import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cronjobs.errors import ScheduleError

__all__ = ["MACROS", "MAX_LENGTH", "Schedule", "check_timezone", "parse"]

MAX_LENGTH = 200
"""The longest expression accepted, in characters."""

_UTC = dt.UTC
_MINUTE = dt.timedelta(minutes=1)
_ZERO = dt.timedelta(0)
# croniter's bound, kept: a search gives up after 50 years of wall-clock time without a
# match (and at the ends of the calendar, years 1 and 9999).
_SEARCH_YEARS = 50
# How many answers of next_after and latest_at_or_before a process remembers, each kind.
_MEMO = 16_384


@functools.cache
def _croniter() -> Any:
    """croniter, imported on first use: only H fields need it."""
    import croniter as library  # noqa: PLC0415  # type: ignore[import-untyped, unused-ignore]

    return library


@functools.cache
def _croniter_module() -> Any:
    """The module croniter.croniter (the package's name ``croniter`` is its class)."""
    _croniter()
    return importlib.import_module("croniter.croniter")


_FIELDS_HELP = "5 fields (minute hour day-of-month month day-of-week)"

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun",
                "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_LONG = ("", "January", "February", "March", "April", "May", "June", "July",
               "August", "September", "October", "November", "December")
# Days in each month, leap years included (February 29 exists).
_MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: five constants
class _Field:
    index: int
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the value of names[0]

    def describe_range(self) -> str:
        text = f"{self.low}-{self.high}"
        if self.names:
            text += f" or {self.names[0]}-{self.names[-1]}"
        return text


_MINUTE_F = _Field(0, "minute", 0, 59)
_HOUR_F = _Field(1, "hour", 0, 23)
_DOM_F = _Field(2, "day-of-month", 1, 31)
_MONTH_F = _Field(3, "month", 1, 12, _MONTH_NAMES, 1)
_DOW_F = _Field(4, "day-of-week", 0, 7, _DAY_NAMES, 0)
_ALL_FIELDS = (_MINUTE_F, _HOUR_F, _DOM_F, _MONTH_F, _DOW_F)

_H_RE = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$", re.IGNORECASE | re.ASCII)
_WHITESPACE = re.compile(r"[ \t\r\n\f\v]+")


class _FieldError(Exception):
    """A problem with one field; turned into a ScheduleError naming the expression."""


# -- parsing ----------------------------------------------------------------------------


def _number(f: _Field, text: str, whole: str) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
    elif f.names and text.lower() in f.names:
        return f.names.index(text.lower()) + f.name_base
    else:
        kind = "a number"
        if f.names:
            kind += f" or a name ({f.names[0]}-{f.names[-1]})"
        piece = "" if text == whole else f" ('{text}')"
        if text == "":
            raise _FieldError(f"{f.name} field '{whole}' is malformed: a value is missing")
        raise _FieldError(f"{f.name} field '{whole}' is not {kind}{piece}")
    if not f.low <= value <= f.high:
        if text == whole:
            raise _FieldError(f"{f.name} field '{whole}' is out of range {f.describe_range()}")
        raise _FieldError(
            f"{f.name} field '{whole}': {value} is out of range {f.describe_range()}"
        )
    return value


def _unsupported(f: _Field, whole: str) -> None:
    upper = whole.upper()
    if "#" in whole:
        raise _FieldError(
            f"{f.name} field '{whole}': '#' (nth weekday of the month) is not supported; "
            "Debian's cron has no such syntax"
        )
    if "?" in whole:
        raise _FieldError(f"{f.name} field '{whole}': '?' is not supported; use '*'")
    if re.fullmatch(r"[0-9]*[LW]|L[0-9]*|LW|[0-9]+L", upper):
        raise _FieldError(
            f"{f.name} field '{whole}': 'L' and 'W' (last day, nearest weekday) are not "
            "supported; Debian's cron has no such syntax"
        )
    if re.search(r"(^|[,/(-])H", upper):
        raise _FieldError(
            f"{f.name} field '{whole}': H must be the whole field "
            "(H, H/15, H(0-29) or H(0-29)/10)"
        )


@functools.lru_cache(maxsize=4096)  # fields recur across expressions: '*', '0', '*/5'
def _parse_field(f: _Field, whole: str) -> tuple[frozenset[int], str]:
    """One standard (non-H) field: its values as Debian reads them (day-of-week 7 folded
    into 0), and the text to hand croniter, with corrections 4 and 5 applied."""
    _unsupported(f, whole)
    values: set[int] = set()
    pieces: list[str] = []
    for item in whole.split(","):
        if item == "":
            raise _FieldError(f"{f.name} field '{whole}' has an empty list item")
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()):
                raise _FieldError(
                    f"{f.name} field '{whole}': step '{step_text}' is not a whole number"
                )
            step = int(step_text)
            if step == 0:
                raise _FieldError(f"{f.name} field '{whole}': a step must be 1 or more, not 0")
        piece = item
        if base == "*":
            low, high = f.low, f.high
        elif "-" in base:
            first, _, last = base.partition("-")
            if first == "" or last == "" or "-" in last:
                raise _FieldError(f"{f.name} field '{whole}' has a malformed range '{base}'")
            low, high = _number(f, first, whole), _number(f, last, whole)
            if high < low:
                fix = (f"{first}-7" if f is _DOW_F and high == 0
                       else f"{first}-{f.high},{f.low}-{last}")
                raise _FieldError(
                    f"{f.name} field '{whole}': range '{base}' is backwards; cron ranges do "
                    f"not wrap around (write '{fix}' instead)"
                )
        else:
            low = _number(f, base, whole)
            # 'a/n' means 'a-max/n'; a lone 'a' is just a
            high = f.high if slash else low
            if slash and f is _DOW_F:
                piece = f"{base}-{f.high}/{step}"  # correction 5: croniter would stop at 6
        if low == high:
            piece = str(low)  # correction 4: croniter reads 'a-a' as the whole cycle
        values.update(range(low, high + 1, step))
        pieces.append(piece)
    if f is _DOW_F and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values), ",".join(pieces)


def _parse_hash(f: _Field, whole: str, hash_key: str) -> frozenset[int]:
    """Expand a Jenkins-style H field with croniter, keyed on the job name."""
    match = _H_RE.match(whole)
    if match is None:
        if "," in whole:
            raise _FieldError(
                f"{f.name} field '{whole}': H must be the whole field "
                "(H, H/15, H(0-29) or H(0-29)/10)"
            )
        raise _FieldError(
            f"{f.name} field '{whole}' is not a valid H form: use H, H/15, H(0-29) or "
            "H(0-29)/10 (with numbers)"
        )
    begin, end, step = match.groups()
    if begin is not None and end is not None:
        low, high = int(begin), int(end)
        for bound in (low, high):
            if not f.low <= bound <= f.high:
                raise _FieldError(
                    f"{f.name} field '{whole}': {bound} is out of range {f.low}-{f.high}"
                )
        if low >= high:
            raise _FieldError(
                f"{f.name} field '{whole}': the H range must go up, e.g. H(0-29)"
            )
    if step is not None and int(step) == 0:
        raise _FieldError(f"{f.name} field '{whole}': a step must be 1 or more, not 0")
    text = whole.upper()
    if f is _DOM_F and text == "H":
        # Keep "monthly" jobs monthly: never the 29th-31st, which some months lack.
        text = "H(1-28)"
    # croniter hashes every field of one key with the same CRC (shifted by the field's
    # position), so minute and hour come out correlated: "H H * * *" would only reach
    # 240 of the 1440 times of day. A key per field makes them independent.
    key = f"{hash_key}\x1f{f.name}".encode()
    try:
        # What croniter.expand(expression, hash_id=key) does first, alone: its hash
        # expander turns the (lower-cased) H field into a plain one, a number or a range
        # with a step. Reading that plain field is then the same for every name that
        # hashes alike, so it is done once (a test checks this against croniter.expand).
        library = _croniter_module()
        plain = library.HashExpander(library.croniter).expand(
            "", f.index, text.lower(), hash_id=key)
        return _plain_values(f, plain)
    except (ValueError, TypeError) as exc:  # pragma: no cover - validated above
        raise _FieldError(f"{f.name} field '{whole}' is not valid: {exc}") from exc


@functools.lru_cache(maxsize=1024)
def _plain_values(f: _Field, plain: str) -> frozenset[int]:
    """croniter's reading of the plain field ``plain`` that an H field hashed into."""
    probe = ["*"] * 5
    probe[f.index] = plain
    expanded: Any = _croniter().croniter.expand(" ".join(probe))
    return _croniter_values(f, expanded[0][f.index])


def _croniter_values(f: _Field, raw: list[Any]) -> frozenset[int]:
    """The values in one field of croniter's expansion (day-of-week 7 folded into 0); a
    '*' anywhere in it (``1,*``) lifts the restriction, for croniter as for Debian."""
    if "*" in raw:
        return _full(f)
    return frozenset(0 if (f is _DOW_F and int(v) == 7) else int(v) for v in raw)


def _full(f: _Field) -> frozenset[int]:
    return frozenset(range(f.low, (6 if f is _DOW_F else f.high) + 1))


def _listed(values: frozenset[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def _possible_days(months: frozenset[int], days: frozenset[int]) -> bool:
    """Whether some month of ``months`` has some day of ``days`` (leap years included)."""
    return any(d <= _MAX_DAYS[m] for m in months for d in days)


@dataclass(frozen=True, eq=False)
class _Spec:
    """A schedule as Debian's cron reads it: the values of each field, the day rule and the
    DST class. There is one object per distinct schedule (see ``_shared``), compared by
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
def _month_days(spec: _Spec, year: int, month: int) -> tuple[int, ...]:
    length = calendar.monthrange(year, month)[1]
    doms, dows = spec.doms, spec.dows
    weekday = dt.date(year, month, 1).isoweekday() - 1  # of the 0th day, Sunday is 0
    if spec.day_or:
        return tuple(d for d in range(1, length + 1)
                     if d in doms or (weekday + d) % 7 in dows)
    return tuple(d for d in range(1, length + 1)
                 if d in doms and (weekday + d) % 7 in dows)


@functools.lru_cache(maxsize=8192)
def _shared(values: tuple[frozenset[int], ...], day_or: bool, wildcard: bool) -> _Spec:
    """The one _Spec of these field values, day rule and DST class."""
    minutes, hours, doms, months, dows = values
    return _Spec(tuple(sorted(minutes)), tuple(sorted(hours)), doms, tuple(sorted(months)),
                 dows, day_or, wildcard)


@dataclass(frozen=True)
class _Compiled:
    """An expression compiled for one job: its schedule, and the expression croniter reads
    as that same schedule (corrections 1-6), which the tests hand croniter as the oracle."""

    spec: _Spec
    cron_expression: str  # numeric, H expanded, corrected


def _never_fires(months: frozenset[int], days: frozenset[int]) -> str:
    """Why an AND of these days and months never matches. Exact: every valid date falls on
    every weekday in some year."""
    month_list = sorted(months)
    day_list = sorted(days)
    month_text = _join([_MONTH_LONG[m] for m in month_list])
    day_text = ("day " if len(day_list) == 1 else "days ") + _join(
        [str(d) for d in day_list], "or")
    return f"{month_text} {'has' if len(month_list) == 1 else 'have'} no {day_text}"


def _join(items: list[str], word: str = "and") -> str:
    if len(items) <= 2:
        return f" {word} ".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


@functools.lru_cache(maxsize=8192)
def _compile(expression: str, hash_key: str) -> _Compiled:
    """Validate and compile a normalised expression (raises ScheduleError)."""
    if expression.startswith("@"):
        expression = _macro(expression)  # correction 6: croniter may hash macros
    parts = expression.split(" ")
    values: list[frozenset[int]] = []
    texts: list[str] = []
    try:
        for f, text in zip(_ALL_FIELDS, parts, strict=True):
            if text[:1] in ("H", "h"):
                hashed = _parse_hash(f, text, hash_key)
                values.append(hashed)
                texts.append(_listed(hashed))
            else:
                parsed, cron_text = _parse_field(f, text)
                values.append(parsed)
                texts.append(cron_text)
    except _FieldError as exc:
        raise ScheduleError(f"invalid schedule '{expression}': {exc}") from None
    months, doms, dows = values[3], values[2], values[4]
    # Debian: the day fields are ORed only when neither starts with '*' (correction 1).
    day_or = not (parts[2].startswith("*") or parts[4].startswith("*"))
    if not day_or and not _possible_days(months, doms):
        reason = _never_fires(months, doms)
        raise ScheduleError(f"invalid schedule '{expression}': it never fires: {reason}")
    if day_or and (doms == _full(_DOM_F) or dows == _full(_DOW_F)):
        # Correction 2: every day matches. croniter would turn the full field into '*'
        # and then AND.
        texts[2] = texts[4] = "*"
        values[2], values[4] = _full(_DOM_F), _full(_DOW_F)
        day_or = False
    elif day_or and not _possible_days(months, doms):
        # Correction 3: only the weekday can match. croniter would search 50 years for the
        # day of the month on every step.
        texts[2] = "*"
        values[2] = _full(_DOM_F)
        day_or = False
    wildcard = parts[0].startswith("*") or parts[1].startswith("*")
    return _Compiled(_shared(tuple(values), day_or, wildcard), " ".join(texts))


def _macro(expression: str) -> str:
    if " " in expression:
        raise ScheduleError(
            f"invalid schedule '{expression}': a macro such as @daily must be the whole "
            "schedule"
        )
    name = expression.lower()
    if name == "@reboot":
        raise ScheduleError(
            f"invalid schedule '{expression}': @reboot is not supported: cronjobs runs jobs on "
            "a clock from a tick that runs every minute, so there is no reboot to run "
            "at; use a time such as '@hourly' or '*/5 * * * *'"
        )
    try:
        return MACROS[name]
    except KeyError:
        raise ScheduleError(
            f"invalid schedule '{expression}': unknown macro; use a 5-field expression or "
            f"one of {', '.join(MACROS)}"
        ) from None


def _normalise(expression: object) -> str:
    if not isinstance(expression, str):
        raise ScheduleError(
            f"invalid schedule {expression!r}: expected a string such as '30 3 * * *', "
            f"not {type(expression).__name__}"
        )
    return _normalised(expression)


@functools.lru_cache(maxsize=8192)
def _normalised(expression: str) -> str:
    if len(expression) > MAX_LENGTH:
        raise ScheduleError(
            f"invalid schedule: it is {len(expression)} characters long; at most "
            f"{MAX_LENGTH} are allowed"
        )
    text = _WHITESPACE.sub(" ", expression).strip(" ")
    if not text:
        raise ScheduleError(
            f"invalid schedule: it is empty; expected {_FIELDS_HELP} such as '30 3 * * *', "
            "or a macro such as '@daily'"
        )
    if not text.isprintable():
        raise ScheduleError(
            f"invalid schedule {text!r}: it contains control characters"
        )
    if text.startswith("@"):
        return text
    count = text.count(" ") + 1
    if count in (6, 7):
        raise ScheduleError(
            f"'{text}' has {count} fields: cronjobs schedules have {_FIELDS_HELP} because the "
            "tick runs once a minute; sub-minute or seconds/year fields are not supported"
        )
    if count != 5:
        raise ScheduleError(
            f"'{text}' has {count} field{'s' if count != 1 else ''}: cronjobs schedules have "
            f"{_FIELDS_HELP}, e.g. '30 3 * * *', or are a macro such as '@daily'"
        )
    return text


def parse(expression: str, timezone: str = "UTC", *, hash_key: str = "") -> Schedule:
    """Validate ``expression`` in ``timezone``; raise ScheduleError saying what is wrong.

    ``hash_key`` (the job's name) is what ``H`` fields are derived from.
    """
    text = _normalise(expression)
    if not isinstance(hash_key, str):
        raise TypeError(f"hash_key must be a str, not {type(hash_key).__name__}")
    return Schedule(text, timezone, hash_key)


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


# -- evaluation ---------------------------------------------------------------------------

_SINGLE, _REPEATED, _SKIPPED = 0, 1, 2


def _classify(
    wall: dt.datetime, zone: dt.tzinfo
) -> tuple[int, dt.datetime, dt.datetime]:
    """How the naive wall time ``wall`` exists in ``zone``.

    Returns (kind, a, b) with naive UTC values: for _SINGLE a == b is the instant; for
    _REPEATED a < b are the first and second occurrence; for _SKIPPED the wall time does
    not exist (a > b are what the offsets before and after the gap would give).
    """
    before = wall.replace(tzinfo=zone, fold=0).utcoffset() or _ZERO
    after = wall.replace(tzinfo=zone, fold=1).utcoffset() or _ZERO
    first = wall - before
    if before == after:
        return _SINGLE, first, first
    second = wall - after
    return (_REPEATED if before > after else _SKIPPED), first, second


def _gap_end(wall: dt.datetime, zone: dt.tzinfo, length: dt.timedelta) -> dt.datetime:
    """The first instant after the gap containing the skipped wall time ``wall``: the
    instant of the first existing wall-clock minute after it (naive UTC)."""
    low, high = 0, -(-length // _MINUTE)  # minutes after `wall`: skipped / exists
    while high - low > 1:
        middle = (low + high) // 2
        if _classify(wall + middle * _MINUTE, zone)[0] == _SKIPPED:
            low = middle
        else:
            high = middle
    return _classify(wall + high * _MINUTE, zone)[1]


def _aware(instant: dt.datetime, what: str = "instant") -> dt.datetime:
    if not isinstance(instant, dt.datetime):
        raise TypeError(f"{what} must be a datetime, not {type(instant).__name__}")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{what} must be an aware datetime, got naive {instant.isoformat()}")
    return instant


@dataclass(frozen=True)
class Schedule:
    """A validated cron expression read on the wall clock of an IANA time zone."""

    expression: str  # as written (stripped, whitespace collapsed)
    timezone: str  # IANA name
    hash_key: str = ""
    _compiled: _Compiled = field(init=False, repr=False, compare=False, hash=False)
    _spec: _Spec = field(init=False, repr=False, compare=False, hash=False)
    _zone: zoneinfo.ZoneInfo = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        text = _normalise(self.expression)
        # H is the only thing the key changes: share one compiled expression otherwise.
        key = self.hash_key if "h" in text.lower() and text[0] != "@" else ""
        compiled = _compile(text, key)
        object.__setattr__(self, "expression", text)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_spec", compiled.spec)
        object.__setattr__(self, "_zone", check_timezone(self.timezone))

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return self._zone

    @property
    def is_wildcard(self) -> bool:
        """True when the minute or hour field starts with '*' (Debian's DST rule)."""
        return self._spec.wildcard

    def local(self, instant: dt.datetime) -> dt.datetime:
        """``instant`` on this schedule's wall clock."""
        return _aware(instant).astimezone(self._zone)

    def next_after(self, instant: dt.datetime) -> dt.datetime:
        """The first slot strictly after ``instant``, as an aware UTC datetime."""
        slot = _next_after(self._spec, self._zone, _naive_utc(instant))
        if slot is None:
            raise ScheduleError(
                f"schedule '{self.expression}' has no slot after {instant.isoformat()}"
            )
        return slot

    def between(self, after: dt.datetime, until: dt.datetime) -> Iterator[dt.datetime]:
        """The slots s with after < s <= until, ascending, as aware UTC datetimes."""
        limit = _aware(until, "until")
        return itertools.takewhile(lambda slot: slot <= limit, self.iter_after(after))

    def latest_at_or_before(self, instant: dt.datetime) -> dt.datetime | None:
        """The last slot s with s <= ``instant``, as an aware UTC datetime; None when there
        is none within the 50 years searched back (in practice: none at all)."""
        return _latest_at_or_before(self._spec, self._zone, _naive_utc(instant))

    def iter_after(self, instant: dt.datetime) -> Iterator[dt.datetime]:
        """Successive slots strictly after ``instant``, as aware UTC datetimes."""
        after = _naive_utc(instant)
        if self._spec.wildcard:
            return _iter_wildcard(self._spec, self._zone, after)
        return _iter_fixed(self._spec, self._zone, after)


def _naive_utc(instant: dt.datetime) -> dt.datetime:
    return _aware(instant).astimezone(_UTC).replace(tzinfo=None)


# Everything below works on naive UTC instants and naive wall times. The answers of the two
# memoised searches depend on nothing but their arguments (the spec stands for the
# schedule), so jobs sharing a schedule, a zone and a cursor share them.


@functools.lru_cache(maxsize=_MEMO)
def _next_after(spec: _Spec, zone: dt.tzinfo, after: dt.datetime) -> dt.datetime | None:
    slots = (_iter_wildcard if spec.wildcard else _iter_fixed)(spec, zone, after)
    return next(slots, None)


@functools.lru_cache(maxsize=_MEMO)
def _latest_at_or_before(spec: _Spec, zone: dt.tzinfo, until: dt.datetime
                         ) -> dt.datetime | None:
    """The matching wall times walked back from the clock at ``until``: the first one with
    a slot not after ``until`` gives the answer."""
    wildcard = spec.wildcard
    found: dt.datetime | None = None
    try:
        local = until.replace(tzinfo=_UTC).astimezone(zone)
        limit = local.replace(tzinfo=None, fold=0)
        if local.fold:
            # `until` is in the second copy of a repeated hour: the first copy of the rest
            # of that hour is already past.
            _, first, second = _classify(limit, zone)
            limit += second - first
        for wall in _walls(spec, limit.replace(second=0, microsecond=0), backward=True):
            kind, first, second = _classify(wall, zone)
            if kind == _SKIPPED:
                if wildcard:
                    continue  # nothing runs at a wall time the clock skips
                first = second = _gap_end(wall, zone, first - second)
            if wildcard and second <= until:  # a repeated time's second copy
                found = second
            elif first <= until:
                found = first
            if found is not None:
                break
    except OverflowError:  # the wall clock ran into year 1
        return None
    if found is None:
        return None
    if wildcard and found != second:
        # The first copy of a repeated wall time: the second copy of an earlier one in the
        # same stretch may be later, and not after `until` either.
        for slot in _iter_wildcard(spec, zone, found):
            if slot.replace(tzinfo=None) > until:
                break
            found = slot.replace(tzinfo=None)
    return found.replace(tzinfo=_UTC)


def _start(zone: dt.tzinfo, after: dt.datetime, back: bool) -> dt.datetime:
    """The wall-clock minute to start matching from."""
    wall = after.replace(tzinfo=_UTC).astimezone(zone).replace(tzinfo=None)
    if back:
        kind, first, second = _classify(wall, zone)
        if kind == _REPEATED:
            # `after` is in a repeated hour: the second copy of earlier wall times in it
            # may still be ahead of `after`.
            wall -= second - first
    if wall.second or wall.microsecond:
        wall = wall.replace(second=0, microsecond=0) + _MINUTE
    if not back:
        kind, first, second = _classify(wall - _MINUTE, zone)
        if kind == _SKIPPED:
            # Just after a gap that ends between two whole minutes (Africa/Monrovia, 1972):
            # the one run for its skipped times may still be ahead.
            wall -= _MINUTE + (first - second)
    return wall


def _iter_fixed(spec: _Spec, zone: dt.tzinfo, after: dt.datetime) -> Iterator[dt.datetime]:
    last = after
    for wall in _walls(spec, _start(zone, after, back=False)):
        kind, first, second = _classify(wall, zone)
        if kind == _SKIPPED:
            first = _gap_end(wall, zone, first - second)
        if first > last:  # skipped times collapse into one run after the gap
            last = first
            yield first.replace(tzinfo=_UTC)


def _iter_wildcard(spec: _Spec, zone: dt.tzinfo, after: dt.datetime
                   ) -> Iterator[dt.datetime]:
    walls = _walls(spec, _start(zone, after, back=True))
    wall = next(walls, None)
    while wall is not None:
        kind, first, second = _classify(wall, zone)
        if kind == _SINGLE:
            if first > after:
                yield first.replace(tzinfo=_UTC)
            wall = next(walls, None)
        elif kind == _SKIPPED:
            wall = next(walls, None)
        else:
            # A repeated stretch: every matching minute in it once on the first copy of
            # the clock, then once more on the second copy.
            end = wall + (second - first)
            firsts, seconds = [first], [second]
            wall = next(walls, None)
            while wall is not None and wall < end:
                kind, first, second = _classify(wall, zone)
                if kind != _REPEATED:
                    break
                firsts.append(first)
                seconds.append(second)
                wall = next(walls, None)
            for instant in firsts + seconds:
                if instant > after:
                    yield instant.replace(tzinfo=_UTC)


# -- matching wall-clock minutes ------------------------------------------------------------


def _walls(spec: _Spec, start: dt.datetime, *, backward: bool = False
           ) -> Iterator[dt.datetime]:
    """The matching wall-clock minutes (naive) from the minute ``start`` on, or back from it
    with ``backward``; ``start`` itself included if it matches. Like croniter, a search
    gives up after 50 years without a match, and at the ends of the calendar."""
    return _walls_back(spec, start) if backward else _walls_on(spec, start)


def _walls_on(spec: _Spec, start: dt.datetime) -> Iterator[dt.datetime]:
    # `at`: still on the start's own month, day and hour, so the fields below it begin
    # at the start's values; once past them, every field begins at its first value.
    year, at = start.year, True
    give_up = min(year + _SEARCH_YEARS, dt.MAXYEAR)
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
                        give_up = min(year + _SEARCH_YEARS, dt.MAXYEAR)
                    at = False
                at = False
            at = False
        at = False
        year += 1


def _walls_back(spec: _Spec, start: dt.datetime) -> Iterator[dt.datetime]:
    # The mirror image of _walls_on: every field walks down from the start's values, then
    # from its last value.
    year, at = start.year, True
    give_up = max(year - _SEARCH_YEARS, dt.MINYEAR)
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
                        give_up = max(year - _SEARCH_YEARS, dt.MINYEAR)
                    at = False
                at = False
            at = False
        at = False
        year -= 1
