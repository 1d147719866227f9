"""Schedules in words: :func:`describe` says a schedule back in plain English, with its zone.

    >>> describe("0 3 L * *", "Europe/Berlin")
    'At 03:00 on the last day of the month (Europe/Berlin)'
    >>> describe("*/15 9-17 * * 1-5")
    'Every 15 minutes, between 09:00 and 17:59, Monday through Friday (UTC)'

The wording is cron-descriptor's (a maintained library that does only this). It is handed
the schedule as this job reads it (``Schedule.canonical``: macros and ``H`` expanded, the
corrections of ``expressions`` applied), so it describes what runs, not a different reading
of the text. cronjobs extends it only where its own syntax or semantics go beyond it:

* ``H``: the values it picked, marked "(fixed for this job)"; a single minute every hour
  reads "Once an hour, at minute 37 (fixed for this job)".
* Day rule: cron-descriptor joins a restricted day-of-week with "or" whenever the day of
  the month is restricted too; here it says "or" only when Debian ORs the fields, and
  "and only" when both must match (one of them starts with ``*``).
* Day extensions in a list (``1,15,L``, ``mon#1,fri#3``), which cron-descriptor reads as
  plain numbers; a single ``L``, ``L-N``, ``NW``, ``LW``, ``D#N`` or ``DL`` is its own wording.
* A day-of-week that starts with ``*`` but is not ``*`` (``*/2``) is named by its days.

This module is not imported on the tick's path (``cronjobs.cron`` does not import it): only
the commands that show descriptions load it and cron-descriptor.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from cron_descriptor import ExpressionDescriptor, Options

from cronjobs.cron.fields import DAY_OF_WEEK, FIELDS, Field
from cronjobs.cron.schedule import Schedule, parse

__all__ = ["describe", "describe_schedule"]

FIXED = " (fixed for this job)"
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ORDINALS = ("", "first", "second", "third", "fourth", "fifth")


def describe(expression: str, tz: str = "UTC", *, name: str = "") -> str:
    """``expression`` in plain English, read in zone ``tz`` for the job called ``name`` (the
    name decides what ``H`` stands for), ending with the zone in parentheses.

    Raises ScheduleError (a UsageError) for an invalid expression or zone, with the same
    message as everywhere else. The signature is stable: other modules (``apply``'s diff
    among them) call it.
    """
    return describe_schedule(parse(expression, tz, hash_key=name))


def describe_schedule(schedule: Schedule) -> str:
    """The description of an already parsed schedule (see :func:`describe`)."""
    return _described(schedule.expression, schedule.timezone, schedule.hash_key)


@functools.lru_cache(maxsize=4096)
def _described(expression: str, timezone: str, hash_key: str) -> str:
    schedule = parse(expression, timezone, hash_key=hash_key)
    return f"{_words(schedule)} ({schedule.timezone})"


def _options() -> Options:
    # English, 24-hour times, whatever the machine's locale says.
    return Options(locale_code="en_US", use_24hour_time_format=True)


def _descriptor(fields: list[str]) -> Any:
    return ExpressionDescriptor(" ".join(fields), _options())


def _words(schedule: Schedule) -> str:
    written = schedule.expression.split(" ")
    hashed = [not schedule.expression.startswith("@") and part[:1] in ("H", "h")
              for part in written] if len(written) == 5 else [False] * 5
    fields = schedule.canonical.split(" ")
    for index, f in enumerate(FIELDS):
        if hashed[index]:
            fields[index] = compact(schedule.values(index), f)
    if fields[4].startswith("*") and fields[4] != "*":  # '*/2': say which days
        plain = compact(schedule.values(4), DAY_OF_WEEK)
        extensions = [i for i in fields[4].split(",") if _is_extension(i)]
        fields[4] = ",".join([plain, *extensions]) if plain != "*" else "*"
    hashed = [h and fields[i] != "*" for i, h in enumerate(hashed)]
    dom, dow = fields[2], fields[4]

    # The time of day and the months; the day fields are worded below, one at a time.
    descriptor = _descriptor([fields[0], fields[1], "*", fields[3], "*"])
    time: str
    if hashed[0] and fields[1] == "*" and "," not in fields[0] and "/" not in fields[0] \
            and "-" not in fields[0]:
        time = f"Once an hour, at minute {fields[0]}"
    else:
        time = descriptor.transform_verbosity(descriptor.get_time_of_day_description())
    if hashed[0] or hashed[1]:
        time += FIXED

    rest: str = ""
    if dom != "*":
        rest += _month_days(dom) + (FIXED if hashed[2] else "")
    if dow != "*":
        days = _week_days(dow)
        if dom != "*":
            days = days.removeprefix(", ").removeprefix("only ")
            days = (", or " if schedule.day_or else ", and only ") + days
        rest += days + (FIXED if hashed[4] else "")
    rest += descriptor.get_month_description() + (FIXED if hashed[3] else "")
    rest = descriptor.transform_verbosity(rest)
    if time.startswith("At ") and rest.startswith(", on "):
        rest = rest[1:]  # "At 03:00 on the last day of the month"
    text = time + rest
    return text[:1].upper() + text[1:]


def _month_days(dom: str) -> str:
    """The day-of-month part, starting with ', '."""
    items = dom.split(",")
    if len(items) == 1 or not any(_is_extension(i) for i in items):
        text: str = _descriptor(["0", "0", dom, "*", "*"]).get_day_of_month_description()
        return text.replace(", 1 days before", ", 1 day before")
    return ", on " + _join([_month_day_item(i) for i in items]) + " of the month"


def _week_days(dow: str) -> str:
    """The day-of-week part alone (as if day-of-month were '*'), starting with ', '."""
    items = dow.split(",")
    if len(items) == 1 or not any(_is_extension(i) for i in items):
        text: str = _descriptor(["0", "0", "*", "*", _quartz(dow)]).get_day_of_week_description()
        return text
    return ", on " + _join([_week_day_item(i) for i in items]) + " of the month"


def _is_extension(item: str) -> bool:
    return "L" in item or "W" in item or "#" in item


def _quartz(dow: str) -> str:
    """croniter's L5 (the last Friday) as cron-descriptor reads it, 5L."""
    return ",".join(f"{i[1:]}L" if i.startswith("L") else i for i in dow.split(","))


def _month_day_item(item: str) -> str:
    if item == "L":
        return "the last day"
    if item == "LW":
        return "the last weekday"
    if item.startswith("L-"):
        n = int(item[2:])
        return f"{n} day{'s' if n > 1 else ''} before the last day"
    if item.endswith("W"):
        n = int(item[:-1])
        return "the first weekday" if n == 1 else f"the weekday nearest day {n}"
    return _plain_item(item, "day", str)


def _week_day_item(item: str) -> str:
    if item.startswith("L"):
        return f"the last {_DAYS[int(item[1:]) % 7]}"
    if "#" in item:
        day, _, nth = item.partition("#")
        return f"the {_ORDINALS[int(nth)]} {_DAYS[int(day) % 7]}"
    return "every " + _plain_item(item, "", _day_name).strip()


def _day_name(text: str) -> str:
    """A weekday as written in a plain item (0-7 or a name) as its English name."""
    names = DAY_OF_WEEK.names
    index = names.index(text.lower()) if text.lower() in names else int(text) % 7
    return _DAYS[index]


def _plain_item(item: str, unit: str, name: Any) -> str:
    """A plain list item beside extension items: '5', '1-5', '1-31/2'."""
    base, _, step = item.partition("/")
    first, _, last = base.partition("-")
    if base == "*":
        return f"every {step}{_suffix(int(step))} {unit or 'day'}" if step else f"every {unit}"
    if last:
        text = f"{unit + 's ' if unit else ''}{name(first)} through {name(last)}"
    else:
        text = f"{unit + ' ' if unit else ''}{name(first)}"
    if step:
        text = f"every {step}{_suffix(int(step))} of {text}"
    return text


def _suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _join(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def compact(values: frozenset[int], f: Field) -> str:
    """A set of values of field ``f`` as the shortest plain field text: ``*``, ``7``,
    ``9-17``, ``7/15`` (7, 22, 37 and 52) or a list."""
    every = range(f.low, (6 if f is DAY_OF_WEEK else f.high) + 1)
    ordered = sorted(values)
    if ordered == list(every):
        return "*"
    if len(ordered) == 1:
        return str(ordered[0])
    steps = {b - a for a, b in itertools.pairwise(ordered)}
    if steps == {1} and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    if f is not DAY_OF_WEEK and len(steps) == 1 and len(ordered) > 2 \
            and ordered[-1] + min(steps) > f.high:
        return f"{ordered[0]}/{min(steps)}"
    return ",".join(str(v) for v in ordered)
