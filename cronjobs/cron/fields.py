"""One field of a cron expression, read the way Debian's cron reads it: its values, and
the text croniter reads as the same values (corrections 4 and 5, see
``cronjobs.cron.expressions``). Error messages name the field."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

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


def _unsupported(f: Field, whole: str) -> None:
    upper = whole.upper()
    if "#" in whole:
        raise FieldError(
            f"{f.name} field '{whole}': '#' (nth weekday of the month) is not supported; "
            "Debian's cron has no such syntax"
        )
    if "?" in whole:
        raise FieldError(f"{f.name} field '{whole}': '?' is not supported; use '*'")
    if re.fullmatch(r"[0-9]*[LW]|L[0-9]*|LW|[0-9]+L", upper):
        raise FieldError(
            f"{f.name} field '{whole}': 'L' and 'W' (last day, nearest weekday) are not "
            "supported; Debian's cron has no such syntax"
        )
    if re.search(r"(^|[,/(-])H", upper):
        raise FieldError(
            f"{f.name} field '{whole}': H must be the whole field "
            "(H, H/15, H(0-29) or H(0-29)/10)"
        )


@functools.lru_cache(maxsize=4096)  # fields recur across expressions: '*', '0', '*/5'
def parse_field(f: Field, whole: str) -> tuple[frozenset[int], str]:
    """One standard (non-H) field: its values as Debian reads them (day-of-week 7 folded
    into 0), and the text to hand croniter, with corrections 4 and 5 applied."""
    _unsupported(f, whole)
    values: set[int] = set()
    pieces: list[str] = []
    for item in whole.split(","):
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
                fix = (f"{first}-7" if f is DAY_OF_WEEK and high == 0
                       else f"{first}-{f.high},{f.low}-{last}")
                raise FieldError(
                    f"{f.name} field '{whole}': range '{base}' is backwards; cron ranges do "
                    f"not wrap around (write '{fix}' instead)"
                )
        else:
            low = _number(f, base, whole)
            # 'a/n' means 'a-max/n'; a lone 'a' is just a
            high = f.high if slash else low
            if slash and f is DAY_OF_WEEK:
                piece = f"{base}-{f.high}/{step}"  # correction 5: croniter would stop at 6
        if low == high:
            piece = str(low)  # correction 4: croniter reads 'a-a' as the whole cycle
        values.update(range(low, high + 1, step))
        pieces.append(piece)
    if f is DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values), ",".join(pieces)


def full(f: Field) -> frozenset[int]:
    return frozenset(range(f.low, (6 if f is DAY_OF_WEEK else f.high) + 1))


def listed(values: frozenset[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def possible_days(months: frozenset[int], days: frozenset[int]) -> bool:
    """Whether some month of ``months`` has some day of ``days`` (leap years included)."""
    return any(d <= MAX_DAYS[m] for m in months for d in days)
