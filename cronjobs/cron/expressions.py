"""Whole expressions: validation, macros, the day rule, and compiling to a shared ``Spec``.

Validation is the package's own: each field is read the way Debian's cron does
(``fields``), naming the field in its error messages; the day extensions (``L``, ``L-N``,
``NW``, ``LW``, ``D#N``, ``DL``) are read beside the plain values, and anything else beyond
Debian's syntax (seconds and year fields, ``?``, ``R``) is rejected. What it yields, the set
of values of each field, the day extensions and the day rule, is a ``Spec`` that the matcher
walks.

croniter is the project's cron library: ``H`` is croniter's hash (``hashing`` works it out
the way croniter does, without importing it), and the tests use croniter as the oracle the
matcher and ``hashing`` are checked against. Its own time-zone
iteration is not used, because it departs from the package's DST rules: given an aware
start it runs ``30 2 * * *`` twice on the fall-back night in Europe/Berlin and invents a
03:00 run of ``*/30 2 * * *`` for the hour the clock skips.

Each compiled expression also carries the plain numeric expression (``H`` and macros
expanded) that croniter reads as Debian's cron reads the original. Where croniter would
read an expression differently, that text is corrected:

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
The day extensions are handed over in croniter's spelling (``L``, ``15W``, ``5#3``, and
``L5`` for the last Friday); croniter has no ``L-N`` and no ``LW``, moves ``31W`` to the
30th in April, and keeps ``#`` an intersection with a restricted day of the month, so the
tests use it as an oracle only for the forms it reads as cronjobs does (cronsim and an
independent reading of each form cover the rest).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from cronjobs.cron.fields import (
    DAY_OF_MONTH,
    DAY_OF_WEEK,
    FIELDS,
    MONTH,
    MONTH_LONG,
    FieldError,
    full,
    listed,
    parse_day_field,
    parse_field,
    possible_days,
)
from cronjobs.cron.hashing import parse_hash
from cronjobs.cron.matching import NO_EXTRAS, DayExtras, Spec, fires, shared_spec
from cronjobs.errors import ScheduleError

MAX_LENGTH = 200
"""The longest expression accepted, in characters."""

FIELDS_HELP = "5 fields (minute hour day-of-month month day-of-week)"

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_WHITESPACE = re.compile(r"[ \t\r\n\f\v]+")


@dataclass(frozen=True)
class Compiled:
    """An expression compiled for one job: its schedule, and the expression croniter reads
    as that same schedule (corrections 1-6), which the tests hand croniter as the oracle."""

    spec: Spec
    cron_expression: str  # numeric, H expanded, corrected


def _never_fires(months: frozenset[int], days: frozenset[int]) -> str:
    """Why an AND of these days and months never matches. Exact: every valid date falls on
    every weekday in some year."""
    month_list = sorted(months)
    day_list = sorted(days)
    month_text = _join([MONTH_LONG[m] for m in month_list])
    day_text = ("day " if len(day_list) == 1 else "days ") + _join(
        [str(d) for d in day_list], "or")
    return f"{month_text} {'has' if len(month_list) == 1 else 'have'} no {day_text}"


def _join(items: list[str], word: str = "and") -> str:
    if len(items) <= 2:
        return f" {word} ".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


@functools.lru_cache(maxsize=8192)
def compile_expression(expression: str, hash_key: str) -> Compiled:
    """Validate and compile a normalised expression (raises ScheduleError)."""
    if expression.startswith("@"):
        expression = _macro(expression)  # correction 6: croniter may hash macros
    parts = expression.split(" ")
    values: list[frozenset[int]] = []
    texts: list[str] = []
    extras = NO_EXTRAS
    try:
        for f, text in zip(FIELDS, parts, strict=True):
            if text[:1] in ("H", "h"):
                hashed = parse_hash(f, text, hash_key)
                values.append(hashed)
                texts.append(listed(hashed))
            elif f in (DAY_OF_MONTH, DAY_OF_WEEK):
                parsed, more, cron_text = parse_day_field(f, text)
                values.append(parsed)
                texts.append(cron_text)
                extras = _merged(extras, more)
            else:
                parsed, cron_text = parse_field(f, text)
                values.append(parsed)
                texts.append(cron_text)
    except FieldError as exc:
        raise ScheduleError(f"invalid schedule '{expression}': {exc}") from None
    months, doms, dows = values[3], values[2], values[4]
    # Debian: the day fields are ORed only when neither starts with '*' (correction 1).
    day_or = not (parts[2].startswith("*") or parts[4].startswith("*"))
    if not day_or and not extras and not possible_days(months, doms):
        reason = _never_fires(months, doms)
        raise ScheduleError(f"invalid schedule '{expression}': it never fires: {reason}")
    if day_or and (doms == full(DAY_OF_MONTH) or dows == full(DAY_OF_WEEK)):
        # Correction 2: every day matches. croniter would turn the full field into '*'
        # and then AND.
        texts[2] = texts[4] = "*"
        values[2], values[4] = full(DAY_OF_MONTH), full(DAY_OF_WEEK)
        extras, day_or = NO_EXTRAS, False
    elif day_or and not fires(doms, frozenset(), extras.without_week_days(), True, months):
        # Correction 3: only the weekday can match. croniter would search 50 years for the
        # day of the month on every step.
        texts[2] = "*"
        values[2] = full(DAY_OF_MONTH)
        extras, day_or = extras.without_month_days(), False
    if not fires(values[2], values[4], extras, day_or, months):
        raise ScheduleError(f"invalid schedule '{expression}': it never fires: no day of "
                            f"{_months_text(months)} matches {_day_fields_text(parts)}")
    wildcard = parts[0].startswith("*") or parts[1].startswith("*")
    spec = shared_spec(tuple(values), day_or, wildcard, extras)
    return Compiled(spec, " ".join(texts))


def hash_fields(expression: str, hash_key: str) -> tuple[frozenset[int] | None, ...] | None:
    """What ``hash_key`` makes of the ``H`` fields of ``expression``: their values (None for
    a field without ``H``); None when the expression is a macro or not valid. The key
    changes nothing else in ``compile_expression``, so two keys with the same answer
    compile the expression to the same schedule: a fleet of ``H`` jobs is worked out by
    hashing each name and compiling once per distinct answer."""
    try:
        text = normalise(expression)
    except ScheduleError:
        return None
    parts = text.split(" ")
    if text.startswith("@") or len(parts) != len(FIELDS):
        return None
    try:
        return tuple(parse_hash(f, part, hash_key) if part[:1] in ("H", "h") else None
                     for f, part in zip(FIELDS, parts, strict=True))
    except FieldError:
        return None


def _merged(a: DayExtras, b: DayExtras) -> DayExtras:
    """The extensions of both day fields (each field has only its own kinds)."""
    if not a:
        return b
    return DayExtras(a.last | b.last, a.nearest | b.nearest, a.last_weekday or b.last_weekday,
                     a.nth | b.nth, a.last_of | b.last_of)


def _months_text(months: frozenset[int]) -> str:
    if months == full(MONTH):
        return "any month"
    return _join([MONTH_LONG[m] for m in sorted(months)], "or")


def _day_fields_text(parts: list[str]) -> str:
    dom, dow = parts[2], parts[4]
    if dom == "*":
        return f"day-of-week '{dow}'"
    if dow == "*":
        return f"day-of-month '{dom}'"
    if dom.startswith("*") or dow.startswith("*"):
        return f"both day-of-month '{dom}' and day-of-week '{dow}'"
    return f"day-of-month '{dom}' or day-of-week '{dow}'"


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


def normalise(expression: object) -> str:
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
            f"invalid schedule: it is empty; expected {FIELDS_HELP} such as '30 3 * * *', "
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
            f"'{text}' has {count} fields: cronjobs schedules have {FIELDS_HELP} because the "
            "tick runs once a minute; sub-minute or seconds/year fields are not supported"
        )
    if count != 5:
        raise ScheduleError(
            f"'{text}' has {count} field{'s' if count != 1 else ''}: cronjobs schedules have "
            f"{FIELDS_HELP}, e.g. '30 3 * * *', or are a macro such as '@daily'"
        )
    return text
