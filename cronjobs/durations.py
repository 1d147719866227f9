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


# -- writing durations: every duration a person reads is written here ----------------------
#
# format_duration  a setting, as it would be typed (1h30m; 0.5s below a minute): settings,
#                  thresholds, retention, a timeout in a run's error
# elapsed          how long something took (an attempt, a run, a typical run, a lateness in
#                  a table): 250ms, 12.5s, 1m5s rounded to the second
# precise          a start lateness's percentile, to the millisecond below a minute: 0.25s,
#                  12.5s, 3m05s, 2h10m
# age              how long ago, coarse, in a health problem: 90s, 15m, 3h05m, 2d

NONE = "-"  # what no duration reads as, in tables and pages


def _units(seconds: int) -> str:
    """Whole seconds in the largest units that divide them: ``1d1h``, ``1m30s``."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _decimal(seconds: float, places: int) -> str:
    """``12.5`` (``places`` decimals at most, no trailing zeros)."""
    return f"{seconds:.{places}f}".rstrip("0").rstrip(".")


def _seconds_of(value: dt.timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def format_duration(value: dt.timedelta | float | None) -> str:
    """A duration (or a number of seconds) the way users write it (``1h30m``), to the
    second; below a minute to the millisecond (``0.5s``); ``none`` for no value."""
    if value is None:
        return "none"
    seconds = _seconds_of(value)
    if abs(seconds) < 60 and seconds != int(seconds):
        return _decimal(seconds, 3) + "s"
    return _units(int(seconds))


def elapsed(value: dt.timedelta | float | None) -> str:
    """How long something took: milliseconds below a second (``250ms``), a tenth of a
    second below a minute (``12.5s``), else to the second (``1m5s``);
    ``-`` for none."""
    if value is None:
        return NONE
    seconds = _seconds_of(value)
    if abs(seconds) < 1:
        return f"{seconds * 1000:.0f}ms"
    if abs(seconds) < 60:
        return _decimal(seconds, 1) + "s"
    return _units(round(seconds))


def precise(seconds: float) -> str:
    """A lateness, to the millisecond below a minute (``0.25s``, ``12.5s``), then to the
    second (``3m05s``) or the minute (``2h10m``)."""
    if abs(seconds) < 60:
        return _decimal(seconds, 3) + "s"
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def age(value: dt.timedelta) -> str:
    """How long, coarse (a health problem's): seconds below two minutes (``90s``), minutes
    below two hours (``15m``), hours and minutes below two days (``26h00m``), else days."""
    seconds = int(value.total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d"
