"""Durations as users write them: ``90s``, ``5m``, ``2h``, ``1d``, ``1h30m``."""

from __future__ import annotations

import datetime as dt
import re

from cronjobs.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d{1,9})([smhdw])")
_WHOLE = re.compile(r"(?:\d{1,9}[smhdw])+")


def parse_duration(text: str, *, option: str = "duration") -> dt.timedelta:
    """Parse ``text`` into a positive timedelta; bare integers are seconds."""
    value = text.strip().lower()
    if value.isdigit() and len(value) <= 9:
        seconds = int(value)
    elif _WHOLE.fullmatch(value):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(value))
    else:
        raise UsageError(
            f"invalid {option} {text!r}: use a number with a unit, such as 90s, 5m, 2h, 1d or 1h30m"
        )
    if seconds <= 0:
        raise UsageError(f"invalid {option} {text!r}: must be greater than zero")
    return dt.timedelta(seconds=seconds)


def parse_bounded(
    text: str, *, option: str, minimum: dt.timedelta, maximum: dt.timedelta
) -> dt.timedelta:
    """Parse a duration and check it lies within ``[minimum, maximum]``."""
    value = parse_duration(text, option=option)
    if not minimum <= value <= maximum:
        raise UsageError(
            f"invalid {option} {text!r}: must be between {format_duration(minimum)} "
            f"and {format_duration(maximum)}"
        )
    return value


def format_duration(value: dt.timedelta | None) -> str:
    """Render a duration the way users write it (``1h30m``); ``none`` for no value."""
    if value is None:
        return "none"
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
