"""Durations as users write them: ``90s``, ``5m``, ``2h``, ``1d``, ``1h30m``.

Every duration option goes through :func:`parse_duration` (or :func:`parse_bounded`, which
states the option's own limits), so none can overflow Python or PostgreSQL."""

from __future__ import annotations

import datetime as dt
import re

from cronjobs.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d{1,9})([smhdw])", re.ASCII)
_WHOLE = re.compile(r"(?:\d{1,9}[smhdw])+", re.ASCII)
MAX_DURATION = dt.timedelta(days=36500)  # far inside timedelta's and interval's range
HELP = "a number with a unit, such as 90s, 5m, 2h, 1d or 1h30m"
DURATION_HELP = "a duration such as 90s, 5m, 2h, 1d or 1h30m"  # in options' help


def looks_like_duration(text: str) -> bool:
    """Whether ``text`` is written as a duration with units (``2h``, ``1h30m``)."""
    return _WHOLE.fullmatch(text.strip().lower()) is not None


def _seconds(text: str, option: str) -> int:
    value = text.strip().lower()
    if value.isascii() and value.isdigit() and len(value) <= 9:
        seconds = int(value)
    elif _WHOLE.fullmatch(value):
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(value))
    else:
        raise UsageError(f"invalid {option} {shown(text)}: use {HELP}")
    if seconds <= 0:
        raise UsageError(f"invalid {option} {shown(text)}: must be greater than zero")
    return seconds


def parse_duration(text: str, *, option: str = "duration") -> dt.timedelta:
    """Parse ``text`` into a positive timedelta of at most :data:`MAX_DURATION`; bare
    integers are seconds."""
    return parse_bounded(text, option=option, minimum=dt.timedelta(seconds=1),
                         maximum=MAX_DURATION)


def parse_bounded(
    text: str, *, option: str, minimum: dt.timedelta, maximum: dt.timedelta
) -> dt.timedelta:
    """Parse a duration and check it lies within ``[minimum, maximum]``."""
    seconds = _seconds(text, option)
    highest = min(maximum, MAX_DURATION)
    if not minimum.total_seconds() <= seconds <= highest.total_seconds():
        raise UsageError(f"invalid {option} {shown(text)}: must be between "
                         f"{format_duration(minimum)} and {format_duration(highest)}")
    return dt.timedelta(seconds=seconds)


def shown(text: str) -> str:
    """User input quoted for a one-line message, cut short when long."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


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
