"""The day extensions (L, L-N, NW, LW in day-of-month; D#N, DL in day-of-week): tables of
cases, their DST behaviour, and property tests against an independent reading of each
form, cronsim and croniter (each where it reads the form as cronjobs does)."""

from __future__ import annotations

import calendar
import datetime as dt
import itertools
import re
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadDateError, croniter
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronjobs.cron import Schedule, parse
from cronjobs.cron.describe import describe_schedule
from cronjobs.cron.matching import walls
from cronjobs.errors import ScheduleError

UTC = dt.UTC


def u(text: str) -> dt.datetime:
    """An aware UTC instant from 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM'."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def take(schedule: Schedule, after: dt.datetime, n: int) -> list[dt.datetime]:
    return list(itertools.islice(schedule.iter_after(after), n))


# -- tables --------------------------------------------------------------------------------

# (id, expression, after, the next slots; UTC, all at 00:00 unless a time is given)
TABLE = [
    # L: the last day, in leap years, common years, 30- and 31-day months
    ("L-leap-february", "0 0 L * *", "2024-01-31T00:00",
     ["2024-02-29", "2024-03-31", "2024-04-30"]),
    ("L-common-february", "0 0 L * *", "2023-01-31T00:00", ["2023-02-28", "2023-03-31"]),
    ("L-2100-is-not-leap", "0 0 L 2 *", "2099-03-01", ["2100-02-28", "2101-02-28"]),
    ("L-february-only", "0 0 L 2 *", "2024-03-01",
     ["2025-02-28", "2026-02-28", "2027-02-28", "2028-02-29"]),
    # L-N: N days before the last day; none in a month too short for it
    ("L-1", "0 0 L-1 * *", "2024-02-01", ["2024-02-28", "2024-03-30", "2024-04-29"]),
    ("L-3", "0 0 L-3 * *", "2026-01-01",
     ["2026-01-28", "2026-02-25", "2026-03-28", "2026-04-27"]),
    ("L-30-only-in-31-day-months", "0 0 L-30 * *", "2024-01-02",
     ["2024-03-01", "2024-05-01", "2024-07-01", "2024-08-01"]),
    ("L-28-february-leap-years-only", "0 0 L-28 2 *", "2023-01-01",
     ["2024-02-01", "2028-02-01"]),
    # NW: the weekday nearest day N, never crossing into another month
    ("1W-saturday-is-monday-the-3rd", "0 0 1W * *", "2026-07-15", ["2026-08-03"]),
    ("1W-saturday-february", "0 0 1W 2 *", "2025-01-01", ["2025-02-03"]),
    ("1W-sunday-is-monday-the-2nd", "0 0 1W * *", "2026-01-15",
     ["2026-02-02", "2026-03-02", "2026-04-01"]),
    ("31W-sunday-is-friday-the-29th", "0 0 31W * *", "2026-05-01", ["2026-05-29"]),
    ("31W-saturday-is-friday-the-30th", "0 0 31W * *", "2026-01-01",
     ["2026-01-30", "2026-03-31", "2026-05-29", "2026-07-31", "2026-08-31"]),
    ("30W-sunday-last-day-is-friday", "0 0 30W * *", "2025-11-01", ["2025-11-28"]),
    ("15W-saturday-is-friday", "0 0 15W * *", "2026-08-01", ["2026-08-14"]),
    ("15W-sunday-is-monday", "0 0 15W * *", "2026-02-01",
     ["2026-02-16", "2026-03-16", "2026-04-15"]),
    ("28W-february-sunday-is-friday", "0 0 28W 2 *", "2021-01-01", ["2021-02-26"]),
    ("29W-leap-years-only", "0 0 29W 2 *", "2019-01-01", ["2020-02-28", "2024-02-29"]),
    # LW: the last weekday
    ("LW", "0 0 LW * *", "2026-01-01",
     ["2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29"]),
    ("LW-february", "0 0 LW 2 *", "2020-01-01", ["2020-02-28", "2021-02-26"]),
    # D#N: the Nth weekday D of the month; none in a month without an Nth
    ("fri#3", "0 0 * * fri#3", "2026-01-01", ["2026-01-16", "2026-02-20", "2026-03-20"]),
    ("1#1", "0 0 * * 1#1", "2026-05-15", ["2026-06-01", "2026-07-06", "2026-08-03"]),
    ("mon#5-months-with-five", "0 0 * * mon#5", "2026-01-01",
     ["2026-03-30", "2026-06-29", "2026-08-31"]),
    ("sun#5-february", "0 0 * 2 sun#5", "2005-01-01", ["2032-02-29"]),
    ("FRI#5-february", "0 0 * feb FRI#5", "2026-01-01", ["2036-02-29"]),
    # DL: the last weekday D of the month
    ("5L", "0 0 * * 5L", "2026-01-01", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    ("7L-is-sunday", "0 0 * * 7L", "2026-01-01", ["2026-01-25", "2026-02-22", "2026-03-29"]),
    ("sunl-lower-case", "0 0 * * sunl", "2026-01-01", ["2026-01-25", "2026-02-22"]),
    # lists, extensions and plain items together
    ("1,15,L", "0 0 1,15,L * *", "2026-02-01", ["2026-02-15", "2026-02-28", "2026-03-01"]),
    ("L-1,L", "0 0 L-1,L 2 *", "2024-01-01", ["2024-02-28", "2024-02-29", "2025-02-27"]),
    ("1,1W-distinct-days", "0 0 1,1W * *", "2026-07-31T12:00", ["2026-08-01", "2026-08-03"]),
    ("1W,15W", "0 0 1W,15W * *", "2026-02-01", ["2026-02-02", "2026-02-16", "2026-03-02"]),
    ("mon#1,fri#3", "0 0 * * mon#1,fri#3", "2026-01-01",
     ["2026-01-05", "2026-01-16", "2026-02-02", "2026-02-20"]),
    ("mon,fri#3", "0 0 * * mon,fri#3", "2026-01-10", ["2026-01-12", "2026-01-16", "2026-01-19"]),
    ("5L,1#2", "0 0 * * 5L,1#2", "2026-01-01",
     ["2026-01-12", "2026-01-30", "2026-02-09", "2026-02-27"]),
    # the Debian day rule: OR when both fields are restricted and neither starts with '*'
    ("or-last-day-or-fridays", "0 0 L * fri", "2026-01-29",
     ["2026-01-30", "2026-01-31", "2026-02-06"]),
    ("or-15W-or-first-monday", "0 0 15W * 1#1", "2026-01-01",
     ["2026-01-05", "2026-01-15", "2026-02-02", "2026-02-16"]),
    ("or-L-or-last-friday", "0 0 L * 5L", "2026-01-01",
     ["2026-01-30", "2026-01-31", "2026-02-27", "2026-02-28"]),
    # ... AND when one of them starts with '*'
    ("and-third-friday-on-an-odd-day", "0 0 */2 * fri#3", "2026-01-01", ["2026-04-17"]),
    ("and-last-day-that-is-a-sunday", "0 0 L * */7", "2026-01-01",
     ["2026-05-31", "2027-01-31"]),
    ("and-step-list-with-L", "0 0 */10,L * *", "2026-02-01",
     ["2026-02-11", "2026-02-21", "2026-02-28", "2026-03-01"]),
    ("and-every-weekday-lifts-the-last-friday", "0 0 * * *,5L", "2026-01-01",
     ["2026-01-02", "2026-01-03"]),
    # times of day are plain fields: steps and lists work as always
    ("times-on-the-last-day", "0,30 9 L * *", "2026-01-31T09:00",
     ["2026-01-31T09:30", "2026-02-28T09:00"]),
]


@pytest.mark.parametrize(("expression", "after", "expected"), [row[1:] for row in TABLE],
                         ids=[row[0] for row in TABLE])
def test_day_extensions(expression: str, after: str, expected: list[str]) -> None:
    schedule = parse(expression, "UTC")
    slots = [u(e) for e in expected]
    assert take(schedule, u(after), len(slots)) == slots
    # ... and walked back, from each slot and from just before it
    tiny = dt.timedelta(microseconds=1)
    assert [schedule.latest_at_or_before(s) for s in slots] == slots
    assert [schedule.latest_at_or_before(s - tiny) for s in slots[1:]] == slots[:-1]


def test_spellings_of_sunday_and_case_agree() -> None:
    start = u("2026-01-01")
    for group in (["0 0 * * 0#1", "0 0 * * 7#1", "0 0 * * sun#1", "0 0 * * SUN#1"],
                  ["0 0 * * 0L", "0 0 * * 7L", "0 0 * * sunL", "0 0 * * SunL", "0 0 * * 7l"],
                  ["0 0 L-2 * *", "0 0 l-2 * *"], ["0 0 15W * *", "0 0 15w * *"],
                  ["0 0 LW * *", "0 0 lw * *", "0 0 Lw * *"]):
        assert len({tuple(take(parse(e), start, 6)) for e in group}) == 1, group


def test_h_combines_with_an_extension_by_the_day_rule() -> None:
    # H is a day of its own (it does not start with '*'): ORed with the last Friday.
    for name in ("alpha", "beta", "gamma"):
        schedule = parse("0 0 H * 5L", hash_key=name)
        day = parse("0 0 H * *", hash_key=name).next_after(u("2026-01-01")).day
        got = {s.date() for s in schedule.between(u("2026-01-01"), u("2026-07-01"))}
        wanted = {d for m in range(1, 7) for d in (
            dt.date(2026, m, day), max(dt.date(2026, m, x) for x in
                                       range(1, calendar.monthrange(2026, m)[1] + 1)
                                       if dt.date(2026, m, x).weekday() == 4))}
        assert got == wanted, name
    # ... and ANDed under a leading '*': the third Friday, in the hours H picked.
    hourly = parse("0 H(8-10) * * fri#3", hash_key="job")
    slots = take(hourly, u("2026-01-01"), 3)
    assert [s.date() for s in slots] == [dt.date(2026, 1, 16), dt.date(2026, 2, 20),
                                         dt.date(2026, 3, 20)]
    assert len({s.hour for s in slots}) == 1


# -- daylight-saving time -------------------------------------------------------------------

# (id, expression, zone, after, next slots in UTC). Europe/Berlin springs forward at 02:00
# on the last Sunday of March and falls back at 03:00 on the last Sunday of October;
# America/New_York springs forward at 02:00 on the second Sunday of March and falls back at
# 02:00 on the first Sunday of November.
DST = [
    ("berlin-last-day-in-the-gap", "30 2 L * *", "Europe/Berlin", "2024-03-30T12:00",
     ["2024-03-31T01:00", "2024-04-30T00:30"]),
    ("berlin-last-sunday-gap-fixed", "30 2 * * 0L", "Europe/Berlin", "2024-03-30T12:00",
     ["2024-03-31T01:00", "2024-04-28T00:30"]),
    ("berlin-last-sunday-repeat-fixed", "30 2 * * 0L", "Europe/Berlin", "2024-10-26T12:00",
     ["2024-10-27T00:30", "2024-11-24T01:30"]),
    ("berlin-last-sunday-repeat-wild", "*/30 2 * * sunL", "Europe/Berlin", "2024-10-26T12:00",
     ["2024-10-27T00:00", "2024-10-27T00:30", "2024-10-27T01:00", "2024-10-27T01:30",
      "2024-11-24T01:00"]),
    ("berlin-last-sunday-gap-wild", "*/30 2 * * sunL", "Europe/Berlin", "2024-03-30T12:00",
     ["2024-04-28T00:00", "2024-04-28T00:30"]),
    ("berlin-fifth-sunday-in-the-gap", "30 2 * * sun#5", "Europe/Berlin", "2024-03-01",
     ["2024-03-31T01:00", "2024-06-30T00:30"]),
    ("berlin-collapsed-gap", "0,30 2 * * sun#5", "Europe/Berlin", "2024-03-01",
     ["2024-03-31T01:00", "2024-06-30T00:00", "2024-06-30T00:30"]),
    ("ny-second-sunday-gap", "30 2 * * sun#2", "America/New_York", "2024-03-01",
     ["2024-03-10T07:00", "2024-04-14T06:30"]),
    ("ny-first-sunday-repeat-fixed", "30 1 * * sun#1", "America/New_York", "2024-11-01",
     ["2024-11-03T05:30", "2024-12-01T06:30"]),
    ("ny-first-sunday-repeat-wild", "*/30 1 * * 0#1", "America/New_York", "2024-11-01",
     ["2024-11-03T05:00", "2024-11-03T05:30", "2024-11-03T06:00", "2024-11-03T06:30",
      "2024-12-01T06:00"]),
    ("ny-hourly-on-the-first-sunday", "0 * * 11 7#1", "America/New_York", "2024-11-03T03:30",
     ["2024-11-03T04:00", "2024-11-03T05:00", "2024-11-03T06:00", "2024-11-03T07:00"]),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"),
                         [row[1:] for row in DST], ids=[row[0] for row in DST])
def test_day_extensions_across_dst(expression: str, zone: str, after: str,
                                   expected: list[str]) -> None:
    schedule = parse(expression, zone)
    slots = [u(e) for e in expected]
    assert take(schedule, u(after), len(slots)) == slots
    assert [schedule.latest_at_or_before(s) for s in slots] == slots


# -- property tests -------------------------------------------------------------------------

DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# A reading of each item, independent of the matcher: (kind, numbers).
Item = tuple[str, int, int]


def _weekday(day: dt.date) -> int:
    return (day.weekday() + 1) % 7  # Sunday 0


def month_day_matches(day: dt.date, item: Item) -> bool:
    kind, a, b = item
    last = calendar.monthrange(day.year, day.month)[1]
    weekdays = [d for d in range(1, last + 1)
                if dt.date(day.year, day.month, d).weekday() < 5]
    if kind == "range":
        return a <= day.day <= b
    if kind == "step":  # a/b: a, a + b, ... up to 31
        return day.day >= a and (day.day - a) % b == 0
    if kind == "L":
        return day.day == last - a
    if kind == "W":  # the weekday of the month closest to day a (there is never a tie)
        return a <= last and day.day == min(weekdays, key=lambda d: abs(d - a))
    assert kind == "LW"
    return day.day == max(weekdays)


def week_day_matches(day: dt.date, item: Item) -> bool:
    kind, a, b = item
    weekday = _weekday(day)
    if kind == "range":
        return a <= weekday <= b or (b == 7 and weekday == 0)
    same = [d for d in range(1, calendar.monthrange(day.year, day.month)[1] + 1)
            if _weekday(dt.date(day.year, day.month, d)) == a % 7]
    if kind == "#":
        return len(same) >= b and same[b - 1] == day.day
    assert kind == "L"
    return same[-1] == day.day


@st.composite
def month_day_items(draw: st.DrawFn, plain_only: bool = False) -> tuple[str, Item]:
    kinds = ["n", "range", "step"] + ([] if plain_only else ["L", "L-", "W", "LW"])
    kind = draw(st.sampled_from(kinds))
    if kind == "n":
        n = draw(st.integers(1, 31))
        return str(n), ("range", n, n)
    if kind == "range":
        a, b = sorted(draw(st.lists(st.integers(1, 31), min_size=2, max_size=2, unique=True)))
        return f"{a}-{b}", ("range", a, b)
    if kind == "step":
        a, b = draw(st.integers(1, 31)), draw(st.integers(2, 15))
        return f"{a}/{b}", ("step", a, b)
    if kind == "L":
        return draw(st.sampled_from(["L", "l"])), ("L", 0, 0)
    if kind == "L-":
        n = draw(st.integers(1, 30))
        return f"L-{n}", ("L", n, 0)
    if kind == "W":
        n = draw(st.integers(1, 31))
        return f"{n}W", ("W", n, 0)
    return "LW", ("LW", 0, 0)


@st.composite
def week_day_items(draw: st.DrawFn, numeric: bool = False) -> tuple[str, Item]:
    kind = draw(st.sampled_from(["range", "#", "L"]))

    def name(d: int) -> str:
        if not numeric and d < 7 and draw(st.booleans()):
            return DAY_NAMES[d]
        return str(d)

    if kind == "range":
        a, b = sorted(draw(st.lists(st.integers(0, 7), min_size=2, max_size=2, unique=True)))
        if draw(st.booleans()):
            return name(a), ("range", a, a)
        return f"{name(a)}-{name(b)}", ("range", a, b)
    d = draw(st.integers(0, 7))
    if kind == "#":
        n = draw(st.integers(1, 5))
        return f"{name(d)}#{n}", ("#", d, n)
    return f"{name(d)}L", ("L", d, 0)


@st.composite
def day_fields(draw: st.DrawFn, cronsim: bool = False
               ) -> tuple[str, str, list[Item], list[Item]]:
    """Day-of-month and day-of-week text with the items each means; '*' or '*/n' first
    sometimes (then Debian ANDs the fields)."""
    doms = draw(st.lists(month_day_items(plain_only=cronsim) if cronsim else month_day_items(),
                         min_size=1, max_size=3))
    if cronsim and draw(st.booleans()):
        doms.append(draw(st.sampled_from([("L", ("L", 0, 0)), ("LW", ("LW", 0, 0))])))
    dows = draw(st.lists(week_day_items(numeric=cronsim), min_size=1, max_size=3))
    dom_text = ",".join(t for t, _ in doms)
    dow_text = ",".join(t for t, _ in dows)
    dom_items, dow_items = [i for _, i in doms], [i for _, i in dows]
    lead = draw(st.sampled_from(["", "", "dom*", "dow*", "dom", "dow"]))
    if lead == "dom*":
        dom_text, dom_items = f"*/{(s := draw(st.integers(1, 7)))}," + dom_text, [
            ("step", 1, s), *dom_items]
    elif lead == "dow*":
        dow_text, dow_items = f"*/{(s := draw(st.integers(1, 7)))}," + dow_text, [
            *[("range", d, d) for d in range(0, 8, s)], *dow_items]
    elif lead == "dom":
        dom_text, dom_items = "*", [("range", 1, 31)]
    elif lead == "dow":
        dow_text, dow_items = "*", [("range", 0, 7)]
    return dom_text, dow_text, dom_items, dow_items


def day_matches(day: dt.date, dom_text: str, dow_text: str, dom_items: list[Item],
                dow_items: list[Item]) -> bool:
    by_date = any(month_day_matches(day, i) for i in dom_items)
    by_weekday = any(week_day_matches(day, i) for i in dow_items)
    if dom_text.startswith("*") or dow_text.startswith("*"):
        return by_date and by_weekday
    return by_date or by_weekday


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day_fields(), st.sampled_from(["*", "*", "2", "4,6,9,11", "1-3", "2,12"]),
       st.integers(1900, 2200), st.integers(1, 12))
def test_matching_days_agree_with_an_independent_reading(
        fields: tuple[str, str, list[Item], list[Item]], months: str, year: int,
        month: int) -> None:
    """Every month's matching days, as the schedule finds them, are the days that the
    independent reading of each item above matches, under Debian's day rule."""
    dom_text, dow_text, dom_items, dow_items = fields
    try:
        schedule = parse(f"0 12 {dom_text} {months} {dow_text}", "UTC")
    except ScheduleError as exc:
        assert "never fires" in exc.message, exc.message
        assume(False)
        raise
    allowed = parse(f"0 0 1 {months} *").values(3)
    assume(month in allowed)
    start = dt.datetime(year, month, 1, tzinfo=UTC) - dt.timedelta(minutes=1)
    end = dt.datetime(year, month, calendar.monthrange(year, month)[1], 23, 59, tzinfo=UTC)
    found = [s.day for s in schedule.between(start, end)]
    wanted = [d for d in range(1, calendar.monthrange(year, month)[1] + 1)
              if day_matches(dt.date(year, month, d), dom_text, dow_text, dom_items, dow_items)]
    assert found == wanted
    # Every such schedule is said in words, its extensions included.
    words = describe_schedule(schedule)
    assert words.endswith(" (UTC)") and "#" not in words, words
    assert not re.search(r"\b(L|LW|\d+W|L-\d+|\d+L)\b", words), words


ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Santiago",
         "Pacific/Apia", "Asia/Kolkata"]


def _is_imaginary(local: dt.datetime) -> bool:
    return local != local.astimezone(UTC).astimezone(local.tzinfo)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day_fields(cronsim=True),
       st.sampled_from(["0", "30", "*/20", "15,45", "*"]),
       st.sampled_from(["2", "1-3", "*", "*/6", "12", "0,2"]),
       st.sampled_from(ZONES),
       st.integers(0, 12 * 365 * 86400))
def test_agrees_with_cronsim(fields: tuple[str, str, list[Item], list[Item]], minute: str,
                             hour: str, zone: str, offset: int) -> None:
    """cronsim reads L and LW (day of month), D#N and DL (day of week, in numbers) as
    cronjobs does, the Debian day rule and the DST rules included."""
    dom_text, dow_text, _, _ = fields
    expression = f"{minute} {hour} {dom_text} * {dow_text}"
    try:
        schedule = parse(expression, zone)
    except ScheduleError as exc:
        assert "never fires" in exc.message, exc.message
        assume(False)
        raise
    start = u("2020-01-01") + dt.timedelta(seconds=offset)
    local = start.astimezone(ZoneInfo(zone))
    raw = itertools.islice(CronSim(expression, local), 60)
    theirs = list(itertools.islice((c for c in raw if c.astimezone(UTC) > start), 6))
    # cronsim's known departures (see test_schedule.test_agrees_with_cronsim): a wall time
    # in a gap returned as a slot; a fixed-time job started in a repeated hour.
    assume(not any(_is_imaginary(c) for c in theirs))
    assert take(schedule, start, len(theirs)) == [c.astimezone(UTC) for c in theirs]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    # what croniter reads as cronjobs does: one day field with extensions, the other '*';
    # W alone and on days every month has (croniter moves 31W to the 30th in April)
    st.lists(st.sampled_from(["L", "1", "15", "28", "1-5"]), min_size=1, max_size=3).map(
        lambda items: (",".join(items), "*")),
    st.integers(1, 28).map(lambda n: (f"{n}W", "*")),
    st.lists(week_day_items(numeric=True).filter(lambda i: i[1][0] != "range"),
             min_size=1, max_size=3).map(lambda items: ("*", ",".join(t for t, _ in items))),
), st.sampled_from(["*", "2", "1-6"]), st.integers(0, 300 * 525_960))
def test_matching_wall_times_agree_with_croniter(fields: tuple[str, str], months: str,
                                                 minutes: int) -> None:
    """croniter's own L, W, # and last-weekday (which it spells L5): the wall-clock minutes
    it finds are the matcher's, forward and back."""
    dom, dow = fields
    schedule = parse(f"30 6 {dom} {months} {dow}")
    start = dt.datetime(1900, 1, 1) + dt.timedelta(minutes=minutes)
    handed = schedule.canonical
    forward = croniter(handed, start - dt.timedelta(minutes=1), ret_type=dt.datetime)
    theirs = [forward.get_next(dt.datetime) for _ in range(8)]
    assert list(itertools.islice(walls(schedule._spec, start), 8)) == theirs
    backward = croniter(handed, start + dt.timedelta(minutes=1), ret_type=dt.datetime)
    theirs = [backward.get_prev(dt.datetime) for _ in range(8)]
    assert list(itertools.islice(walls(schedule._spec, start, backward=True), 8)) == theirs


# -- where croniter departs, and cronjobs chooses ------------------------------------------

def test_w_on_a_day_the_month_lacks_does_not_fire() -> None:
    # Like 31 itself, 31W does not fire in a month without a 31st (Quartz's rule too);
    # croniter moves it to the nearest weekday of the 30th. LW is the last weekday.
    ours = take(parse("0 0 31W * *"), u("2026-04-01"), 1)
    assert ours == [u("2026-05-29")]
    theirs = croniter("0 0 31W * *", dt.datetime(2026, 4, 1)).get_next(dt.datetime)
    assert theirs == dt.datetime(2026, 4, 30)
    assert take(parse("0 0 LW * *"), u("2026-04-01"), 1) == [u("2026-04-30")]


def test_an_extension_ors_with_the_other_day_field_as_debian_does() -> None:
    # Both day fields restricted, neither starting with '*': either matches (Debian's rule,
    # cronsim's too). croniter keeps '#' an intersection with the day of the month.
    ours = take(parse("0 0 1 * fri#3"), u("2026-01-01"), 3)
    assert ours == [u("2026-01-16"), u("2026-02-01"), u("2026-02-20")]
    assert [c.replace(tzinfo=UTC) for c in itertools.islice(
        CronSim("0 0 1 * 5#3", dt.datetime(2026, 1, 1)), 3)] == ours
    # croniter looks for a 1st that is a third Friday, and finds none in 50 years.
    with pytest.raises(CroniterBadDateError):
        croniter("0 0 1 * 5#3", dt.datetime(2026, 1, 1)).get_next(dt.datetime)
