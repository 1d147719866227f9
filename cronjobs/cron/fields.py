"""One field of a cron expression, read the way Debian's cron reads it: its values, and
the text croniter reads as the same values (corrections 4 and 5, see
``cronjobs.cron.expressions``); in the day fields also the extensions ``L``, ``L-N``,
``NW``, ``LW`` (day of month), ``D#N`` and ``DL`` (day of week). Error messages name the
field."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from cronjobs.cron.matching import DayExtras

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun",
                "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MONTH_LONG = ("", "January", "February", "March", "April", "May", "June", "July",
               "August", "September", "October", "November", "December")
# Days in each month, leap years included (February 29 exists).
MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: five constants
class Field:
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


MINUTE = Field(0, "minute", 0, 59)
HOUR = Field(1, "hour", 0, 23)
DAY_OF_MONTH = Field(2, "day-of-month", 1, 31)
MONTH = Field(3, "month", 1, 12, _MONTH_NAMES, 1)
DAY_OF_WEEK = Field(4, "day-of-week", 0, 7, _DAY_NAMES, 0)
FIELDS = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)



class FieldError(Exception):
    """A problem with one field; turned into a ScheduleError naming the expression."""


def _number(f: Field, text: str, whole: str) -> int:
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
            raise FieldError(f"{f.name} field '{whole}' is malformed: a value is missing")
        raise FieldError(f"{f.name} field '{whole}' is not {kind}{piece}")
    if not f.low <= value <= f.high:
        if text == whole:
            raise FieldError(f"{f.name} field '{whole}' is out of range {f.describe_range()}")
        raise FieldError(
            f"{f.name} field '{whole}': {value} is out of range {f.describe_range()}"
        )
    return value


_DAY_FORMS = ("day-of-month L (the last day), L-3 (3 days before it), LW (the last "
              "weekday) or 15W (the weekday nearest the 15th); day-of-week 5L or friL (the last "
              "Friday) or fri#3 (the third Friday)")
# An L or W item, or an L or W at either end of a range or step: not a name ('jul', 'wed').
_LW_ITEM = re.compile(r"(^|[,/-])(L|LW|L\d+|\d+[LW])([,/-]|$)", re.ASCII)


def _unsupported(f: Field, whole: str) -> None:
    upper = whole.upper()
    if "?" in whole:
        raise FieldError(f"{f.name} field '{whole}': '?' is not supported; use '*'")
    if "#" in whole and f is not DAY_OF_WEEK:
        raise FieldError(
            f"{f.name} field '{whole}': '#' (the nth weekday of the month, as in fri#3) "
            "belongs in the day-of-week field"
        )
    if f not in (DAY_OF_MONTH, DAY_OF_WEEK) and _LW_ITEM.search(upper):
        raise FieldError(f"{f.name} field '{whole}': 'L' and 'W' belong in the day fields: "
                         f"{_DAY_FORMS}")
    if re.search(r"(^|[,/(-])H", upper):
        raise FieldError(
            f"{f.name} field '{whole}': H must be the whole field "
            "(H, H/15, H(0-29) or H(0-29)/10)"
        )


def _wrap_fix(f: Field, first: str, last: str, low: int, high: int) -> str:
    """The simplest fields that say what a backwards range ``first-last`` was meant to:
    the values from ``low`` up to the end of the cycle and on from its start to ``high``,
    spelt with names if the range used one."""
    named = bool(f.names) and not (first.isdigit() and last.isdigit())

    def spell(value: int) -> str:
        return f.names[value - f.name_base] if named else str(value)

    def span(a: int, b: int) -> str:
        return spell(a) if a == b else f"{spell(a)}-{spell(b)}"

    if f is DAY_OF_WEEK:
        if low == 7:  # Sunday written as 7 starts the week: 7-mon is sun-mon
            return span(0, high)
        if high == 0:  # ...and ends it: fri-sun is fri-7
            return f"{spell(low)}-7"
        return f"{span(low, 6)},{span(0, high)}"
    return f"{span(low, f.high)},{span(f.low, high)}"


def _item(f: Field, item: str, whole: str) -> tuple[range, str]:
    """One plain list item (``*``, ``a``, ``a-b``, with a step): its values (day-of-week 7
    not yet folded into 0) and the text croniter reads as them."""
    if item == "":
        raise FieldError(f"{f.name} field '{whole}' has an empty list item")
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not (step_text.isascii() and step_text.isdigit()):
            raise FieldError(
                f"{f.name} field '{whole}': step '{step_text}' is not a whole number"
            )
        step = int(step_text)
        if step == 0:
            raise FieldError(f"{f.name} field '{whole}': a step must be 1 or more, not 0")
    piece = item
    if base == "*":
        low, high = f.low, f.high
    elif "-" in base:
        first, _, last = base.partition("-")
        if first == "" or last == "" or "-" in last:
            raise FieldError(f"{f.name} field '{whole}' has a malformed range '{base}'")
        low, high = _number(f, first, whole), _number(f, last, whole)
        if high < low:
            raise FieldError(
                f"{f.name} field '{whole}': range '{base}' is backwards; cron ranges do "
                f"not wrap around (write '{_wrap_fix(f, first, last, low, high)}' instead)"
            )
    else:
        low = _number(f, base, whole)
        # 'a/n' means 'a-max/n'; a lone 'a' is just a
        high = f.high if slash else low
        if slash and f is DAY_OF_WEEK:
            piece = f"{base}-{f.high}/{step}"  # correction 5: croniter would stop at 6
    if low == high:
        piece = str(low)  # correction 4: croniter reads 'a-a' as the whole cycle
    return range(low, high + 1, step), piece


def _month_day_extension(item: str, whole: str) -> tuple[str, int] | None:
    """A day-of-month extension item as (kind, number): ('last', N) for L-N (L is L-0),
    ('nearest', N) for NW, ('last_weekday', 0) for LW; None for a plain item."""
    upper = item.upper()
    if "L" not in upper and "W" not in upper:
        return None
    if upper in ("L", "LW"):
        return ("last", 0) if upper == "L" else ("last_weekday", 0)
    found = re.fullmatch(r"L-(\d+)|(\d+)W", upper, re.ASCII)
    if found is None:
        raise FieldError(
            f"day-of-month field '{whole}': '{item}' is not a day-of-month form of L or W; "
            "write L (the last day), L-3 (3 days before it), LW (the last weekday) or 15W "
            "(the weekday nearest the 15th), each as an item of its own, without a range or "
            "step"
        )
    before, day = found.groups()
    if before is not None:
        if not 1 <= int(before) <= 30:
            raise FieldError(f"day-of-month field '{whole}': in '{item}' the days before the "
                             "last day must be 1-30")
        return "last", int(before)
    if not DAY_OF_MONTH.low <= int(day) <= DAY_OF_MONTH.high:
        raise FieldError(f"day-of-month field '{whole}': in '{item}' the day is out of range "
                         f"{DAY_OF_MONTH.describe_range()}")
    return "nearest", int(day)


def _week_day_extension(item: str, whole: str) -> tuple[str, int, int] | None:
    """A day-of-week extension item as (kind, weekday 0-6, N): ('nth', D, N) for D#N,
    ('last_of', D, 0) for DL; None for a plain item."""
    upper = item.upper()
    f = DAY_OF_WEEK
    if "#" in upper:
        base, _, nth = item.partition("#")
        if base == "" or any(c in base for c in "*-/"):
            raise FieldError(f"day-of-week field '{whole}': '#' follows a single weekday, as "
                             f"in fri#3 or 5#3 (the third Friday), not '{base}'")
        day = _number(f, base, whole) % 7
        if not (nth.isascii() and nth.isdigit() and 1 <= int(nth) <= 5):
            raise FieldError(f"day-of-week field '{whole}': in '{item}' the number after '#' "
                             "must be 1-5 (fri#3 is the third Friday of the month)")
        return "nth", day, int(nth)
    if "L" in upper:  # no weekday name has an L
        if upper == "L":
            raise FieldError(
                f"day-of-week field '{whole}': 'L' needs a weekday before it: 5L or friL is "
                "the last Friday of the month (the last day of the month is L in the "
                "day-of-month field)"
            )
        if not upper.endswith("L") or any(c in item for c in "*-/"):
            hint = f"; write '{item[1:]}L'" if re.fullmatch(r"L[0-7]", upper) else ""
            raise FieldError(f"day-of-week field '{whole}': 'L' follows a single weekday, as "
                             f"in 5L or friL (the last Friday of the month){hint}")
        return "last_of", _number(f, item[:-1], whole) % 7, 0
    if re.fullmatch(r"\d*W", upper, re.ASCII):
        raise FieldError(f"day-of-week field '{whole}': 'W' (the nearest weekday) belongs in "
                         "the day-of-month field, as in 15W")
    return None


@functools.lru_cache(maxsize=4096)  # fields recur across expressions: '*', '0', '*/5'
def parse_field(f: Field, whole: str) -> tuple[frozenset[int], str]:
    """One standard (non-H) field: its values as Debian reads them (day-of-week 7 folded
    into 0), and the text to hand croniter, with corrections 4 and 5 applied. The day fields
    go through ``parse_day_field``, which also reads their extensions."""
    if f in (DAY_OF_MONTH, DAY_OF_WEEK):
        days, extras, text = parse_day_field(f, whole)
        if extras:
            raise FieldError(f"{f.name} field '{whole}': L, W and # are not allowed here")
        return days, text
    _unsupported(f, whole)
    values: set[int] = set()
    pieces: list[str] = []
    for item in whole.split(","):
        span, piece = _item(f, item, whole)
        values.update(span)
        pieces.append(piece)
    return frozenset(values), ",".join(pieces)


@functools.lru_cache(maxsize=4096)
def parse_day_field(f: Field, whole: str) -> tuple[frozenset[int], DayExtras, str]:
    """A day-of-month or day-of-week field (not H): its plain values (day-of-week 7 folded
    into 0), its extension items, and the text to hand croniter (whose spelling of the last
    Friday is ``L5``; it has no ``L-N``). An extension is an item of a list on its own: it
    takes no range and no step."""
    _unsupported(f, whole)
    values: set[int] = set()
    pieces: list[str] = []
    last: set[int] = set()
    nearest: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    last_weekday = False
    for item in whole.split(","):
        if f is DAY_OF_MONTH and (month_day := _month_day_extension(item, whole)):
            kind, number = month_day
            if kind == "last":
                last.add(number)
                pieces.append("L" if number == 0 else f"L-{number}")
            elif kind == "nearest":
                nearest.add(number)
                pieces.append(f"{number}W")
            else:
                last_weekday = True
                pieces.append("LW")
        elif f is DAY_OF_WEEK and (week_day := _week_day_extension(item, whole)):
            kind, day, number = week_day
            if kind == "nth":
                nth.add((day, number))
                pieces.append(f"{day}#{number}")
            else:
                last_of.add(day)
                pieces.append(f"L{day}")
        else:
            span, piece = _item(f, item, whole)
            values.update(span)
            pieces.append(piece)
    if f is DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    extras = DayExtras(frozenset(last), frozenset(nearest), last_weekday, frozenset(nth),
                       frozenset(last_of))
    return frozenset(values), extras, ",".join(pieces)


def full(f: Field) -> frozenset[int]:
    return frozenset(range(f.low, (6 if f is DAY_OF_WEEK else f.high) + 1))


def listed(values: frozenset[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def possible_days(months: frozenset[int], days: frozenset[int]) -> bool:
    """Whether some month of ``months`` has some day of ``days`` (leap years included)."""
    return any(d <= MAX_DAYS[m] for m in months for d in days)
