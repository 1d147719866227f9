"""Instants written out: the one place that decides how a time reads, for the command line
and the dashboard alike (docs/reference/output.md, "Times").

- For people: ``2026-11-25 15:31 CET``, minutes in a zone with its abbreviation; the zone
  is the local one ($TZ, else the system's) or UTC (``--utc``); relative to an operation's
  instant where that helps: ``in 3 min``, ``2 h ago``.
- For machines (every JSON document): ISO 8601 in UTC with its offset,
  ``2026-11-25T14:31:02.105251+00:00``.

Pure: the instant to be relative to is a parameter, never read here.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, replace
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PATTERN = "%Y-%m-%d %H:%M"
NONE = "-"  # what a missing instant reads as, in tables and lines
DASH = "\u2013"  # an en dash, between the ends of a range


def iso(value: dt.datetime | None) -> str | None:
    """An instant for JSON: ISO 8601 in UTC with an explicit offset (None stays None)."""
    return None if value is None else value.astimezone(dt.UTC).isoformat()


def local_zone() -> dt.tzinfo | None:
    """The zone $TZ names, else None (the system's local zone)."""
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def abbreviation(value: dt.datetime) -> str:
    """The zone's short name at that instant (``CET``, ``UTC``), or its offset
    (``+0530``) where the zone has no name for it."""
    name = value.strftime("%Z")
    if not name or name.startswith(("+", "-")):
        return value.strftime("%z") or "UTC"
    return "UTC" if name in ("UTC", "GMT", "Z") and value.utcoffset() == dt.timedelta(0) \
        else name


def in_zone(value: dt.datetime, zone: dt.tzinfo | None) -> str:
    """``2026-11-25 15:31 CET``: the instant on the wall clock of ``zone`` (None: the
    system's local zone)."""
    local = value.astimezone(zone)
    return f"{local.strftime(PATTERN)} {abbreviation(local)}"


def in_zone_named(value: dt.datetime | None, zone: str) -> str:
    """The instant on the wall clock of an IANA zone (a job's own zone)."""
    return NONE if value is None else in_zone(value, ZoneInfo(zone))


def relative(value: dt.datetime, now: dt.datetime) -> str:
    """``3 min ago``, ``in 2 h``, ``now``: the largest unit, rounded down."""
    seconds = (value - now).total_seconds()
    size = abs(seconds)
    if size < 1:
        return "now"
    amount = ""
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if size >= length:
            amount = f"{int(size // length)} {unit}"
            break
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


@dataclass(frozen=True)
class Times:
    """How one command (or page) shows instants: in the local zone or UTC, and, given
    ``now`` (the operation's instant), how long ago or ahead each is."""

    now: dt.datetime | None = None
    utc: bool = False
    zone: dt.tzinfo | None = None  # None: $TZ, else the system's local zone
    relative: bool = True  # False: absolute times only, even with ``now``

    @classmethod
    def of(cls, *, utc: bool, now: dt.datetime | None = None, relative: bool = True
           ) -> Times:
        """Times in UTC, or in the zone $TZ names (else the system's)."""
        return cls(now=now, utc=utc, zone=None if utc else local_zone(), relative=relative)

    def at(self, value: dt.datetime | None) -> str:
        """``2026-11-25 15:31 CET``, absolute; ``-`` for no instant."""
        if value is None:
            return NONE
        return in_zone(value, dt.UTC if self.utc else self.zone)

    def when(self, value: dt.datetime | None) -> str:
        """``2026-11-25 15:31 CET (in 3 min)``: absolute, and relative when ``now`` is
        known."""
        if value is None:
            return NONE
        if self.now is None or not self.relative:
            return self.at(value)
        return f"{self.at(value)} ({relative(value, self.now)})"

    def ago(self, value: dt.datetime | None) -> str:
        """``in 3 min`` or ``2 h ago`` alone (absolute when ``now`` is unknown)."""
        if value is None:
            return NONE
        if self.now is None or not self.relative:
            return self.at(value)
        return relative(value, self.now)

    def span(self, first: dt.datetime, last: dt.datetime) -> str:
        """``2026-11-25 14:02\u201315:40 CET``: a range, the second date left out on one
        day."""
        if first == last:
            return self.at(first)
        zone = dt.UTC if self.utc else self.zone
        a, b = first.astimezone(zone), last.astimezone(zone)
        if a.date() == b.date() and abbreviation(a) == abbreviation(b):
            return f"{a.strftime(PATTERN)}{DASH}{b.strftime('%H:%M')} {abbreviation(b)}"
        return f"{self.at(first)} {DASH} {self.at(last)}"

    def relative_to(self, now: dt.datetime) -> Times:
        return replace(self, now=now)

    @property
    def label(self) -> str:
        """The zone the times are in, for a table's headers."""
        if self.utc:
            return "UTC"
        if self.now is None:
            return "local"
        return abbreviation(self.now.astimezone(self.zone))
