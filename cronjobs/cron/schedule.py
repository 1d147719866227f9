""":class:`Schedule`: a validated expression on the wall clock of a zone, and its slots.

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

import datetime as dt
import functools
import itertools
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass, field

from cronjobs.cron.expressions import Compiled, compile_expression, normalise
from cronjobs.cron.matching import Spec, walls
from cronjobs.cron.zones import REPEATED, SINGLE, SKIPPED, check_timezone, classify, gap_end
from cronjobs.errors import ScheduleError

_UTC = dt.UTC
_MINUTE = dt.timedelta(minutes=1)
_ZERO = dt.timedelta(0)
# How many answers of next_after and latest_at_or_before a process remembers, each kind.
_MEMO = 16_384


def parse(expression: str, timezone: str = "UTC", *, hash_key: str = "") -> Schedule:
    """Validate ``expression`` in ``timezone``; raise ScheduleError saying what is wrong.

    ``hash_key`` (the job's name) is what ``H`` fields are derived from.
    """
    text = normalise(expression)
    if not isinstance(hash_key, str):
        raise TypeError(f"hash_key must be a str, not {type(hash_key).__name__}")
    return Schedule(text, timezone, hash_key)


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
    _compiled: Compiled = field(init=False, repr=False, compare=False, hash=False)
    _spec: Spec = field(init=False, repr=False, compare=False, hash=False)
    _zone: zoneinfo.ZoneInfo = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        text = normalise(self.expression)
        # H is the only thing the key changes: share one compiled expression otherwise.
        key = self.hash_key if "h" in text.lower() and text[0] != "@" else ""
        compiled = compile_expression(text, key)
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

    @property
    def canonical(self) -> str:
        """The five fields as this job reads them: macros and ``H`` expanded (in numbers),
        croniter's corrections applied (see ``expressions``), names kept where croniter reads
        them as written; the last Friday is ``L5``, the third ``5#3``."""
        return self._compiled.cron_expression

    @property
    def day_or(self) -> bool:
        """True when a day matches if either day field does (Debian: both are restricted
        and neither starts with '*'); False when both must."""
        return self._spec.day_or

    def values(self, index: int) -> frozenset[int]:
        """The plain values of field ``index`` (0 minute ... 4 day-of-week, Sunday 0)."""
        spec = self._spec
        fields = (spec.minutes, spec.hours, spec.doms, spec.months, spec.dows)
        return frozenset(fields[index])

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
def _next_after(spec: Spec, zone: dt.tzinfo, after: dt.datetime) -> dt.datetime | None:
    slots = (_iter_wildcard if spec.wildcard else _iter_fixed)(spec, zone, after)
    return next(slots, None)


@functools.lru_cache(maxsize=_MEMO)
def _latest_at_or_before(spec: Spec, zone: dt.tzinfo, until: dt.datetime
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
            _, first, second = classify(limit, zone)
            limit += second - first
        for wall in walls(spec, limit.replace(second=0, microsecond=0), backward=True):
            kind, first, second = classify(wall, zone)
            if kind == SKIPPED:
                if wildcard:
                    continue  # nothing runs at a wall time the clock skips
                first = second = gap_end(wall, zone, first - second)
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
        kind, first, second = classify(wall, zone)
        if kind == REPEATED:
            # `after` is in a repeated hour: the second copy of earlier wall times in it
            # may still be ahead of `after`.
            wall -= second - first
    if wall.second or wall.microsecond:
        wall = wall.replace(second=0, microsecond=0) + _MINUTE
    if not back:
        kind, first, second = classify(wall - _MINUTE, zone)
        if kind == SKIPPED:
            # Just after a gap that ends between two whole minutes (Africa/Monrovia, 1972):
            # the one run for its skipped times may still be ahead.
            wall -= _MINUTE + (first - second)
    return wall


def _iter_fixed(spec: Spec, zone: dt.tzinfo, after: dt.datetime) -> Iterator[dt.datetime]:
    last = after
    for wall in walls(spec, _start(zone, after, back=False)):
        kind, first, second = classify(wall, zone)
        if kind == SKIPPED:
            first = gap_end(wall, zone, first - second)
        if first > last:  # skipped times collapse into one run after the gap
            last = first
            yield first.replace(tzinfo=_UTC)


def _iter_wildcard(spec: Spec, zone: dt.tzinfo, after: dt.datetime
                   ) -> Iterator[dt.datetime]:
    matching = walls(spec, _start(zone, after, back=True))
    wall = next(matching, None)
    while wall is not None:
        kind, first, second = classify(wall, zone)
        if kind == SINGLE:
            if first > after:
                yield first.replace(tzinfo=_UTC)
            wall = next(matching, None)
        elif kind == SKIPPED:
            wall = next(matching, None)
        else:
            # A repeated stretch: every matching minute in it once on the first copy of
            # the clock, then once more on the second copy.
            end = wall + (second - first)
            firsts, seconds = [first], [second]
            wall = next(matching, None)
            while wall is not None and wall < end:
                kind, first, second = classify(wall, zone)
                if kind != REPEATED:
                    break
                firsts.append(first)
                seconds.append(second)
                wall = next(matching, None)
            for instant in firsts + seconds:
                if instant > after:
                    yield instant.replace(tzinfo=_UTC)
