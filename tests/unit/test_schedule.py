"""cronjobs.cron: validation, Debian cron semantics, DST rules, cronsim as the oracle."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronjobs.cron import Schedule, check_timezone, parse
from cronjobs.cron.fields import FIELDS as CRON_FIELDS
from cronjobs.cron.fields import full, parse_field
from cronjobs.cron.hashing import parse_hash
from cronjobs.cron.matching import walls
from cronjobs.errors import ScheduleError, UsageError

UTC = dt.UTC


def u(text: str) -> dt.datetime:
    """An aware UTC instant from 'YYYY-MM-DDTHH:MM'."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def take(schedule: Schedule, after: dt.datetime, n: int) -> list[dt.datetime]:
    return list(itertools.islice(schedule.iter_after(after), n))


# -- validation ---------------------------------------------------------------------------

INVALID = [
    # field counts
    ("*/10 * * * * *", "'*/10 * * * * *' has 6 fields: cronjobs schedules have 5 fields "
                       "(minute hour day-of-month month day-of-week) because the tick runs "
                       "once a minute; sub-minute or seconds/year fields are not supported"),
    ("0 0 12 * * * 2030", "has 7 fields: cronjobs schedules have 5 fields"),
    ("0 3 * *", "'0 3 * *' has 4 fields: cronjobs schedules have 5 fields (minute hour "
                "day-of-month month day-of-week)"),
    ("0", "'0' has 1 field: cronjobs schedules have 5 fields"),
    ("1 2 3 4 5 6 7 8", "has 8 fields"),
    ("", "it is empty"),
    ("  \t\n ", "it is empty"),
    ("x" * 201, "201 characters long; at most 200"),
    ("0\x00 * * * *", "control characters"),
    # out of range, naming the field
    ("61 * * * *", "invalid schedule '61 * * * *': minute field '61' is out of range 0-59"),
    ("* 24 * * *", "hour field '24' is out of range 0-23"),
    ("* * 0 * *", "day-of-month field '0' is out of range 1-31"),
    ("* * 32 * *", "day-of-month field '32' is out of range 1-31"),
    ("* * * 0 *", "month field '0' is out of range 1-12 or jan-dec"),
    ("* * * 13 *", "month field '13' is out of range 1-12 or jan-dec"),
    ("* * * * 8", "day-of-week field '8' is out of range 0-7 or sun-sat"),
    ("0-60/5 * * * *", "minute field '0-60/5': 60 is out of range 0-59"),
    ("0 1,25 * * *", "hour field '1,25': 25 is out of range 0-23"),
    # malformed pieces
    ("a * * * *", "minute field 'a' is not a number"),
    ("mon * * * *", "minute field 'mon' is not a number"),
    ("1.5 * * * *", "minute field '1.5' is not a number"),
    ("* * * foo *", "month field 'foo' is not a number or a name (jan-dec)"),
    ("* * * * funday", "day-of-week field 'funday' is not a number or a name (sun-sat)"),
    ("* * * jan-foo *", "month field 'jan-foo' is not a number or a name (jan-dec) ('foo')"),
    ("5-1 * * * *", "minute field '5-1': range '5-1' is backwards; cron ranges do not wrap "
                    "around (write '5-59,0-1' instead)"),
    ("0 22-2 * * *", "hour field '22-2': range '22-2' is backwards"),
    ("0 0 * * fri-sun", "write 'fri-7' instead"),
    # ... and the simplest fix for a range that wraps
    ("0 0 * * 7-mon", "day-of-week field '7-mon': range '7-mon' is backwards; cron ranges do "
                      "not wrap around (write 'sun-mon' instead)"),
    ("0 0 * * 7-2", "(write '0-2' instead)"),
    ("0 0 * * sat-mon", "(write 'sat,sun-mon' instead)"),
    ("0 0 * * fri-tue", "(write 'fri-sat,sun-tue' instead)"),
    ("0 0 * * 5-1", "(write '5-6,0-1' instead)"),
    ("0 0 * * 6-0", "(write '6-7' instead)"),
    ("0 0 1 nov-feb *", "month field 'nov-feb': range 'nov-feb' is backwards; cron ranges do "
                        "not wrap around (write 'nov-dec,jan-feb' instead)"),
    ("0 0 1 dec-jan *", "(write 'dec,jan' instead)"),
    ("0 0 1 12-2 *", "(write '12,1-2' instead)"),
    ("59-0 * * * *", "(write '59,0' instead)"),
    ("0 23-1 * * *", "(write '23,0-1' instead)"),
    ("0 0 31-2 * *", "(write '31,1-2' instead)"),
    ("0 0 L * 7-mon", "(write 'sun-mon' instead)"),
    ("*/0 * * * *", "minute field '*/0': a step must be 1 or more, not 0"),
    ("*/x * * * *", "minute field '*/x': step 'x' is not a whole number"),
    ("1/ * * * *", "minute field '1/': step '' is not a whole number"),
    ("/5 * * * *", "minute field '/5' is malformed: a value is missing"),
    ("1,,2 * * * *", "minute field '1,,2' has an empty list item"),
    ("-5 * * * *", "minute field '-5' has a malformed range '-5'"),
    ("1-2-3 * * * *", "minute field '1-2-3' has a malformed range"),
    # syntax neither Debian's cron nor the day extensions have
    ("0 0 ? * *", "day-of-month field '?': '?' is not supported; use '*'"),
    ("0 0 * * 5#3 ?", "has 6 fields"),
    # the day extensions where they do not belong, or malformed
    ("L * * * *", "minute field 'L': 'L' and 'W' belong in the day fields: day-of-month L "
                  "(the last day), L-3 (3 days before it), LW (the last weekday) or 15W"),
    ("0 5W * * *", "hour field '5W': 'L' and 'W' belong in the day fields"),
    ("0 0 1 L *", "month field 'L': 'L' and 'W' belong in the day fields"),
    ("0 0 1 1-L *", "month field '1-L': 'L' and 'W' belong in the day fields"),
    ("0 0 5#3 * *", "day-of-month field '5#3': '#' (the nth weekday of the month, as in "
                    "fri#3) belongs in the day-of-week field"),
    ("0#1 0 * * *", "minute field '0#1': '#'"),
    ("0 0 * * 15W", "day-of-week field '15W': 'W' (the nearest weekday) belongs in the "
                    "day-of-month field, as in 15W"),
    ("0 0 * * L", "day-of-week field 'L': 'L' needs a weekday before it: 5L or friL is the "
                  "last Friday of the month (the last day of the month is L in the "
                  "day-of-month field)"),
    ("0 0 * * L5", "day-of-week field 'L5': 'L' follows a single weekday, as in 5L or friL "
                   "(the last Friday of the month); write '5L'"),
    ("0 0 * * mon-fri#2", "day-of-week field 'mon-fri#2': '#' follows a single weekday, as "
                          "in fri#3 or 5#3 (the third Friday), not 'mon-fri'"),
    ("0 0 * * *#2", "'#' follows a single weekday"),
    ("0 0 * * #2", "'#' follows a single weekday"),
    ("0 0 * * fri#0", "day-of-week field 'fri#0': in 'fri#0' the number after '#' must be 1-5 "
                      "(fri#3 is the third Friday of the month)"),
    ("0 0 * * fri#6", "the number after '#' must be 1-5"),
    ("0 0 * * fri#", "the number after '#' must be 1-5"),
    ("0 0 * * fri#x", "the number after '#' must be 1-5"),
    ("0 0 * * 8#1", "day-of-week field '8#1': 8 is out of range 0-7 or sun-sat"),
    ("0 0 * * fun#1", "day-of-week field 'fun#1' is not a number or a name (sun-sat) ('fun')"),
    ("0 0 * * 5L/2", "day-of-week field '5L/2': 'L' follows a single weekday"),
    ("0 0 * * 1-5L", "day-of-week field '1-5L': 'L' follows a single weekday"),
    ("0 0 * * 9L", "day-of-week field '9L': 9 is out of range 0-7 or sun-sat"),
    ("0 0 L/2 * *", "day-of-month field 'L/2': 'L/2' is not a day-of-month form of L or W; "
                    "write L (the last day), L-3 (3 days before it), LW (the last weekday) or "
                    "15W (the weekday nearest the 15th), each as an item of its own, without "
                    "a range or step"),
    ("0 0 1-L * *", "'1-L' is not a day-of-month form of L or W"),
    ("0 0 1-15W * *", "'1-15W' is not a day-of-month form of L or W"),
    ("0 0 W15 * *", "'W15' is not a day-of-month form of L or W"),
    ("0 0 W * *", "'W' is not a day-of-month form of L or W"),
    ("0 0 L3 * *", "'L3' is not a day-of-month form of L or W"),
    ("0 0 5L * *", "'5L' is not a day-of-month form of L or W"),
    ("0 0 L-0 * *", "day-of-month field 'L-0': in 'L-0' the days before the last day must be "
                    "1-30"),
    ("0 0 L-31 * *", "the days before the last day must be 1-30"),
    ("0 0 0W * *", "day-of-month field '0W': in '0W' the day is out of range 1-31"),
    ("0 0 32W * *", "in '32W' the day is out of range 1-31"),
    ("0 0 1,,L * *", "day-of-month field '1,,L' has an empty list item"),
    ("0 0 H * 5L", None),  # valid: H is a day of its own, ORed with the last Friday
    ("0 0 H(L) * *", "day-of-month field 'H(L)' is not a valid H form"),
    ("0 0 L,H * *", "day-of-month field 'L,H': H must be the whole field"),
    # H
    ("H(30-10) * * * *", "minute field 'H(30-10)': the H range must go up"),
    ("H(0-60) * * * *", "minute field 'H(0-60)': 60 is out of range 0-59"),
    ("H/0 * * * *", "minute field 'H/0': a step must be 1 or more, not 0"),
    ("H,5 * * * *", "minute field 'H,5': H must be the whole field"),
    ("5,H * * * *", "minute field '5,H': H must be the whole field"),
    ("0 0 H(0-5) * *", "day-of-month field 'H(0-5)': 0 is out of range 1-31"),
    ("0 0 1 H(jan-mar) *", "month field 'H(jan-mar)' is not a valid H form"),
    ("Hx * * * *", "minute field 'Hx' is not a valid H form"),
    # macros
    ("@reboot", "invalid schedule '@reboot': @reboot is not supported"),
    ("@REBOOT", "@reboot is not supported"),
    ("@fortnightly", "invalid schedule '@fortnightly': unknown macro; use a 5-field expression "
                     "or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
                     "@hourly"),
    ("@daily 5", "a macro such as @daily must be the whole schedule"),
    # never fires
    ("0 0 30 2 *", "invalid schedule '0 0 30 2 *': it never fires: February has no day 30"),
    ("0 0 31 4,6 *", "it never fires: April and June have no day 31"),
    ("0 0 30,31 2 *", "it never fires: February has no days 30 or 31"),
    ("0 0 31 2,4,6,9,11 *", "February, April, June, September and November have no day 31"),
    ("0 0 30-31 feb */1", "never fires"),  # a leading '*' in day-of-week: both must match
    ("0 0 31W 2,4 *", "invalid schedule '0 0 31W 2,4 *': it never fires: no day of February "
                      "or April matches day-of-month '31W'"),
    ("0 0 L-29 2 *", "it never fires: no day of February matches day-of-month 'L-29'"),
    ("0 0 LW * */6", "it never fires: no day of any month matches both day-of-month 'LW' and "
                     "day-of-week '*/6'"),
    ("0 0 */2 * sat#5", None),  # valid: 31 May 2025 is the fifth Saturday
    ("0 0 1-7 * */7", None),  # valid: the first Sunday
    ("0 0 */7 2 fri#5", None),  # valid: 29 February 2036 is a Friday, and 29 is in */7
    ("0 0 */10 2 fri#5", "it never fires: no day of February matches both day-of-month '*/10' "
                         "and day-of-week 'fri#5'"),
    ("0 0 * 4 fri#5,L-30", "day-of-week field 'fri#5,L-30'"),
    ("0 0 * 2 fri#5", None),  # valid: 29 February 2036 is the fifth Friday
]


@pytest.mark.parametrize(("expression", "fragment"), INVALID)
def test_invalid_expressions_say_what_is_wrong(expression: str, fragment: str | None) -> None:
    if fragment is None:  # the valid neighbour of an invalid row
        parse(expression, "UTC", hash_key="job")
        return
    with pytest.raises(ScheduleError) as info:
        parse(expression, "UTC", hash_key="job")
    assert fragment in info.value.message
    assert isinstance(info.value, UsageError)


@pytest.mark.parametrize("garbage", [5, None, b"0 3 * * *", ["0", "3", "*", "*", "*"]])
def test_non_string_expressions_are_rejected(garbage: object) -> None:
    with pytest.raises(ScheduleError, match="expected a string such as '30 3 \\* \\* \\*'"):
        parse(garbage, "UTC")  # type: ignore[arg-type]


VALID = [
    "0 3 * * *",
    "*/15 * * * *",
    "0 9-17 * * mon-fri",
    "0 0 1,15 * *",
    "0 0 * JAN-mar MON-fri",
    "30 4 * * 7",
    "0 0 * * sun-sat/2",
    "59/15 * * * *",
    "0-59 0-23 1-31 1-12 0-7",
    "0 0 29 2 *",
    "0 0 31 2 mon",  # either day field may match: Mondays in February
    " 0 3 * * * ",
    "H H * * *",
    "h/15 H(2-5) * * *",
    "H H H H H",
    "@yearly",
    "@Annually",
    "@MONTHLY",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
]


@pytest.mark.parametrize("expression", VALID)
def test_valid_expressions_parse(expression: str) -> None:
    schedule = parse(expression, "Europe/Berlin", hash_key="job")
    assert schedule.next_after(u("2024-06-01T00:00")) > u("2024-06-01T00:00")


def test_expression_is_kept_as_written_with_whitespace_collapsed() -> None:
    schedule = parse("  0\t3  * *\n *  ", "Europe/Berlin", hash_key="j")
    assert schedule.expression == "0 3 * * *"
    assert schedule.timezone == "Europe/Berlin"
    assert schedule.hash_key == "j"
    assert schedule == parse("0 3 * * *", "Europe/Berlin", hash_key="j")
    assert hash(schedule) == hash(parse("0 3 * * *", "Europe/Berlin", hash_key="j"))
    assert parse("@Daily").expression == "@Daily"


def test_day_30_of_february_fires_when_either_day_field_may_match() -> None:
    # "0 0 30 2 mon": both day fields are restricted, so Mondays in February match.
    schedule = parse("0 0 30 2 mon")
    assert take(schedule, u("2025-01-01T00:00"), 2) == [u("2025-02-03T00:00"),
                                                        u("2025-02-10T00:00")]


# -- time zones ---------------------------------------------------------------------------


def test_unknown_time_zone_message() -> None:
    with pytest.raises(ScheduleError) as info:
        check_timezone("Mars/Base")
    assert info.value.message == (
        "unknown time zone 'Mars/Base': use an IANA name such as 'Europe/Berlin' or 'UTC'"
    )


@pytest.mark.parametrize(
    "name", ["", " UTC", "Europe", "../etc/passwd", "/usr/share/zoneinfo/UTC", "localtime", 5]
)
def test_bad_time_zones_are_rejected(name: object) -> None:
    with pytest.raises(ScheduleError, match="unknown time zone"):
        check_timezone(name)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="unknown time zone"):
        parse("0 3 * * *", name)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Europe/Berlin", "America/Santiago"])
def test_known_time_zones(name: str) -> None:
    assert check_timezone(name) == ZoneInfo(name)


def test_local_converts_to_the_schedule_zone() -> None:
    schedule = parse("30 2 * * *", "Europe/Berlin")
    local = schedule.local(u("2024-10-27T01:30"))
    assert local.tzinfo == ZoneInfo("Europe/Berlin")
    assert (local.replace(tzinfo=None), local.fold) == (dt.datetime(2024, 10, 27, 2, 30), 1)


def test_naive_datetimes_are_a_programming_error() -> None:
    schedule = parse("0 3 * * *", "Europe/Berlin")
    naive = dt.datetime(2024, 1, 1)
    with pytest.raises(ValueError, match="naive"):
        schedule.next_after(naive)
    with pytest.raises(ValueError, match="naive"):
        schedule.iter_after(naive)
    with pytest.raises(ValueError, match="naive"):
        schedule.between(naive, u("2024-02-01T00:00"))
    with pytest.raises(ValueError, match="naive"):
        schedule.between(u("2024-01-01T00:00"), naive)
    with pytest.raises(ValueError, match="naive"):
        schedule.local(naive)


def test_results_are_utc_whatever_zone_the_input_is_in() -> None:
    schedule = parse("0 3 * * *", "Asia/Tokyo")
    start = dt.datetime(2024, 1, 1, 12, 0, tzinfo=ZoneInfo("America/New_York"))
    slot = schedule.next_after(start)
    assert slot.tzinfo is UTC
    # 12:00 in New York is 02:00 on the 2nd in Tokyo; 03:00 JST is 18:00 UTC the day before
    assert slot == u("2024-01-01T18:00")


# -- plain semantics ----------------------------------------------------------------------


SEMANTICS = [
    # (expression, after, expected next slots, all in UTC)
    ("*/20 * * * *", "2024-05-01T10:05", ["2024-05-01T10:20", "2024-05-01T10:40",
                                          "2024-05-01T11:00"]),
    ("59/15 * * * *", "2024-05-01T10:05", ["2024-05-01T10:59", "2024-05-01T11:59"]),
    ("0 12 * * 7", "2024-05-01T00:00", ["2024-05-05T12:00", "2024-05-12T12:00"]),
    ("0 0 * * sun-sat/3", "2024-05-01T00:00",  # sun, wed, sat
     ["2024-05-04T00:00", "2024-05-05T00:00", "2024-05-08T00:00"]),
    # Both day fields restricted: either matches (the 1st, and Mondays).
    ("0 0 1 * mon", "2024-04-25T00:00", ["2024-04-29T00:00", "2024-05-01T00:00",
                                         "2024-05-06T00:00"]),
    # A day field starting with '*' means both must match (Debian): Mondays on odd days.
    ("0 0 */2 * mon", "2024-04-25T00:00", ["2024-04-29T00:00", "2024-05-13T00:00",
                                           "2024-05-27T00:00"]),
    # ... the usual "first Sunday of the month" idiom therefore works.
    ("0 6 1-7 * */7", "2024-05-01T00:00", ["2024-05-05T06:00", "2024-06-02T06:00"]),
    ("0 0 29 2 *", "2024-03-01T00:00", ["2028-02-29T00:00", "2032-02-29T00:00"]),
    # 2100 is not a leap year: eight years between two February 29ths.
    ("0 0 29 2 *", "2097-01-01T00:00", ["2104-02-29T00:00"]),
    ("0 0 29 2 */7", "2089-01-01T00:00", ["2128-02-29T00:00"]),  # Sunday Feb 29s: 40 years
    ("@yearly", "2024-05-01T00:00", ["2025-01-01T00:00"]),
    ("@monthly", "2024-05-01T00:00", ["2024-06-01T00:00"]),
    ("@weekly", "2024-05-01T00:00", ["2024-05-05T00:00"]),
    ("@hourly", "2024-05-01T00:00", ["2024-05-01T01:00"]),
]


@pytest.mark.parametrize(("expression", "after", "expected"), SEMANTICS)
def test_semantics(expression: str, after: str, expected: list[str]) -> None:
    schedule = parse(expression, "UTC")
    assert take(schedule, u(after), len(expected)) == [u(e) for e in expected]


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@monthly", "0 0 1 * *"),
     ("@weekly", "0 0 * * 0"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
     ("@hourly", "0 * * * *"), ("@HOURLY", "0 * * * *")],
)
def test_macros_are_their_expressions(macro: str, equivalent: str) -> None:
    for zone, start in [("Europe/Berlin", u("2024-10-26T20:00")),
                        ("America/Santiago", u("2024-09-07T20:00")),
                        ("UTC", u("2023-12-30T00:00"))]:
        ours = take(parse(macro, zone), start, 6)
        assert ours == take(parse(equivalent, zone), start, 6)


def test_slots_are_strictly_after_the_instant() -> None:
    schedule = parse("0 3 * * *")
    assert schedule.next_after(u("2024-01-01T03:00")) == u("2024-01-02T03:00")
    assert schedule.next_after(u("2024-01-01T02:59:59.999999")) == u("2024-01-01T03:00")
    assert schedule.next_after(u("2024-01-01T03:00") + dt.timedelta(microseconds=1)) == u(
        "2024-01-02T03:00")


# -- H ------------------------------------------------------------------------------------


def test_h_is_stable_per_job_name() -> None:
    start = u("2024-01-01T00:00")
    first = take(parse("H H * * *", "Europe/Berlin", hash_key="billing"), start, 3)
    again = take(parse("H H * * *", "Europe/Berlin", hash_key="billing"), start, 3)
    assert first == again
    # Pinned: if croniter ever changes its hashing, every H job would move.
    assert parse("H * * * *", hash_key="job-a").next_after(start) == u("2024-01-01T00:13")


def test_h_spreads_different_names() -> None:
    start = u("2024-01-01T00:00")
    minutes = {parse("H * * * *", hash_key=f"job-{i}").next_after(start).minute
               for i in range(60)}
    assert len(minutes) >= 25
    slots = {parse("H H * * *", hash_key=f"job-{i}").next_after(start) for i in range(60)}
    assert len(slots) >= 50


def test_h_forms() -> None:
    start = u("2023-12-31T23:59")
    for i in range(50):
        name = f"n{i}"
        quarter = take(parse("H/15 * * * *", hash_key=name), start, 8)
        offset = quarter[0].minute
        assert offset < 15
        assert [s.minute for s in quarter] == [offset, offset + 15, offset + 30, offset + 45] * 2
        assert parse("H(0-29) * * * *", hash_key=name).next_after(start).minute <= 29
        hours = {s.hour for s in take(parse("0 H(2-5)/2 * * *", hash_key=name), start, 4)}
        assert hours in ({2, 4}, {3, 5})
        # A bare H day-of-month is 1-28, so the job runs every month.
        monthly = take(parse("0 0 H * *", hash_key=name), start, 12)
        assert len({s.day for s in monthly}) == 1
        assert [s.month for s in monthly] == list(range(1, 13))
        assert monthly[0].day <= 28


def test_h_fields_are_what_croniter_expand_makes_of_them() -> None:
    # Each H field is read with its own key: exactly what croniter.expand(expression,
    # hash_id=...) makes of the field.
    forms = [["H", "h", "H/15", "H/1", "H(0-29)", "H(10-50)/7", "H(58-59)/5"],
             ["H", "H/6", "H/1", "H(2-5)/2", "H(0-1)"], ["H", "H/3", "H/1", "H(1-9)/4"],
             ["H", "H/5", "H/1", "H(2-4)"], ["H", "H/2", "H/1", "H(1-5)", "H(0-6)/3"]]
    for f in CRON_FIELDS:
        for form in forms[f.index]:
            probe = ["*"] * 5
            probe[f.index] = "H(1-28)" if f.index == 2 and form == "H" else form
            for i in range(150):
                key = f"job-{i}"
                raw = croniter.expand(" ".join(probe), hash_id=f"{key}\x1f{f.name}".encode())
                expected = croniter_set(f.index, raw[0][f.index])
                assert parse_hash(f, form, key) == expected, (form, key)


def test_h_without_a_name_is_deterministic() -> None:
    start = u("2024-01-01T00:00")
    assert parse("H H * * *").next_after(start) == parse("H H * * *").next_after(start)
    assert parse("H H * * *").next_after(start) != parse("H H * * *", hash_key="x").next_after(
        start)


def test_h_counts_as_a_fixed_time() -> None:
    # The minute and hour do not start with '*': once on the fall-back night.
    schedule = parse("H 2 * * *", "Europe/Berlin", hash_key="x")
    assert len(list(schedule.between(u("2024-10-26T12:00"), u("2024-10-27T12:00")))) == 1


def test_h_and_plain_expressions_share_nothing_across_names() -> None:
    a = parse("H * * * *", hash_key="alpha")
    b = parse("H * * * *", hash_key="omega")
    start = u("2024-01-01T00:00")
    assert a.next_after(start) != b.next_after(start)
    assert a != b


# -- croniter and its corrections ---------------------------------------------------------

# (id, expression, what croniter is handed, hash key, after, expected next slots in UTC).
# Each row is a place where croniter, given the expression as written, reads it
# differently from Debian's cron.
CRONITER_CORRECTIONS = [
    # 1. croniter ORs restricted day fields; Debian only when neither starts with '*'.
    ("day-or-by-leading-star", "0 0 */2 * mon", "0 0 */2 * 1", "", "2024-04-25T00:00",
     ["2024-04-29T00:00", "2024-05-13T00:00", "2024-05-27T00:00"]),
    # 2. A day field listing every day: croniter makes it '*' and ANDs; Debian ORs.
    ("full-day-of-month-ors", "0 0 1-31 * 1,*/2", "0 0 * * *", "", "2024-04-30T12:00",
     ["2024-05-01T00:00", "2024-05-02T00:00", "2024-05-03T00:00"]),
    ("full-day-of-week-ors", "0 0 1,*/2 * 0-6", "0 0 * * *", "", "2024-04-30T12:00",
     ["2024-05-01T00:00", "2024-05-02T00:00", "2024-05-03T00:00"]),
    # 4. A single-value range is that value, not the whole cycle.
    ("single-value-range", "5-5 * * * *", "5 * * * *", "", "2024-05-01T10:00",
     ["2024-05-01T10:05", "2024-05-01T11:05"]),
    ("single-value-range-step", "5-5/3 * * * *", "5 * * * *", "", "2024-05-01T10:00",
     ["2024-05-01T10:05", "2024-05-01T11:05"]),
    ("single-month-range", "0 0 1 jan-jan *", "0 0 1 1 *", "", "2024-05-01T00:00",
     ["2025-01-01T00:00", "2026-01-01T00:00"]),
    ("single-weekday-range-7", "0 0 * * 7-7", "0 0 * * 7", "", "2024-05-01T00:00",
     ["2024-05-05T00:00", "2024-05-12T00:00"]),
    # 5. 'a/n' in day-of-week runs up to 7, Sunday again.
    ("weekday-step-reaches-sunday", "0 0 * * mon/2", "0 0 * * mon-7/2", "", "2024-05-01T00:00",
     ["2024-05-03T00:00", "2024-05-05T00:00", "2024-05-06T00:00", "2024-05-08T00:00"]),
    ("weekday-step-from-7", "0 0 * * 7/2", "0 0 * * 7", "", "2024-05-01T00:00",
     ["2024-05-05T00:00", "2024-05-12T00:00"]),
    # 6. Macros are not hashed, whatever the job's name.
    ("daily-macro-with-a-name", "@daily", "0 0 * * *", "job", "2024-05-01T10:00",
     ["2024-05-02T00:00", "2024-05-03T00:00"]),
    ("hourly-macro-with-a-name", "@hourly", "0 * * * *", "job", "2024-05-01T10:00",
     ["2024-05-01T11:00", "2024-05-01T12:00"]),
]


@pytest.mark.parametrize(("expression", "handed", "hash_key", "after", "expected"),
                         [row[1:] for row in CRONITER_CORRECTIONS],
                         ids=[row[0] for row in CRONITER_CORRECTIONS])
def test_croniter_corrections(expression: str, handed: str, hash_key: str, after: str,
                              expected: list[str]) -> None:
    schedule = parse(expression, "UTC", hash_key=hash_key)
    assert take(schedule, u(after), len(expected)) == [u(e) for e in expected]
    # Corrected by rewriting, not left to the guard (correction 7).
    assert schedule._compiled.cron_expression == handed
    # croniter alone departs here. If this fails, croniter changed: the correction may be
    # dead code now.
    raw = croniter(expression, u(after).replace(tzinfo=None), ret_type=dt.datetime,
                   hash_id=hash_key or None)
    theirs = [raw.get_next(dt.datetime).replace(tzinfo=UTC) for _ in expected]
    assert theirs != [u(e) for e in expected]


def test_a_day_of_the_month_no_month_has_drops_out_under_or() -> None:
    # Correction 3: croniter would find the same Mondays, searching 50 years for a
    # 30 February on every step; it is handed the weekday alone.
    schedule = parse("0 0 30,31 2 mon")
    assert schedule._compiled.cron_expression == "0 0 * 2 1"
    assert not schedule._spec.day_or
    assert take(schedule, u("2025-01-01T00:00"), 2) == [u("2025-02-03T00:00"),
                                                        u("2025-02-10T00:00")]
    # A day some selected month has stays: the 31st of March, and Mondays in Feb/March.
    either = parse("0 0 31 feb,mar mon")
    assert either._spec.day_or
    assert u("2025-03-31T00:00") in either.between(u("2025-03-20T00:00"), u("2025-04-01T00:00"))
    assert u("2026-03-31T00:00") in either.between(u("2026-03-20T00:00"), u("2026-04-01T00:00"))


def test_croniter_reads_the_handed_expression_as_debian_does() -> None:
    # The matcher iterates Debian's values; croniter, the oracle, gets the corrected text.
    for expression, handed in [("5-5 * * * *", "5 * * * *"), ("*/30 2 * * *", "*/30 2 * * *"),
                               ("0 0 * * mon/2", "0 0 * * mon-7/2")]:
        schedule = parse(expression)
        assert schedule._compiled.cron_expression == handed
        assert croniter_fields(schedule) == spec_fields(schedule)


def croniter_set(index: int, raw: list[Any]) -> frozenset[int]:
    """One field of croniter.expand's answer as a set (a '*' is the whole field)."""
    if "*" in raw:
        return full(CRON_FIELDS[index])
    return frozenset(0 if index == 4 and int(v) == 7 else int(v) for v in raw)


def debian_item(index: int, low: int, high: int, step: int) -> frozenset[int]:
    values = set(range(low, high + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


def croniter_reading(index: int, text: str) -> frozenset[int]:
    """croniter's reading of what the validation hands it for ``text`` in field ``index``
    (corrections 4 and 5)."""
    values, handed = parse_field(CRON_FIELDS[index], text)
    fields = ["*"] * 5
    fields[index] = handed
    read = croniter_set(index, croniter.expand(" ".join(fields))[0][index])
    assert read == values, text  # the validation's own reading
    return read


def test_croniter_reads_every_weekday_and_month_item_as_debian_does() -> None:
    """Every a, a/n and a-b/n of the small fields, and every single-value range."""
    for index in (3, 4):
        low, high = FIELDS[index][0], FIELDS[index][1]
        for a in range(low, high + 1):
            forms = [(str(a), a, a, 1)]
            forms += [(f"{a}/{n}", a, high, n) for n in range(1, high + 2)]
            for b in range(a, high + 1):
                forms += [(f"{a}-{b}/{n}", a, b, n) for n in range(1, high - low + 3)]
            for text, first, last, step in forms:
                assert croniter_reading(index, text) == debian_item(index, first, last, step)
    for index, (low, high, _, _) in enumerate(FIELDS[:3]):
        for a in range(low, high + 1):
            for suffix in ("", "/1", "/2", "/7"):
                assert croniter_reading(index, f"{a}-{a}{suffix}") == {a}


def test_croniter_own_time_zone_iteration_departs_from_debian() -> None:
    # Why croniter iterates naive wall-clock time here: given an aware start it runs a
    # fixed-time job twice on the fall-back night, and invents a run for a skipped hour.
    berlin = ZoneInfo("Europe/Berlin")
    fixed = croniter("30 2 * * *", u("2024-10-26T12:00").astimezone(berlin),
                     ret_type=dt.datetime)
    theirs = [fixed.get_next(dt.datetime).astimezone(UTC) for _ in range(2)]
    assert theirs == [u("2024-10-27T00:30"), u("2024-10-27T01:30")]
    assert take(parse("30 2 * * *", "Europe/Berlin"), u("2024-10-26T12:00"), 2) == [
        u("2024-10-27T00:30"), u("2024-10-28T01:30")]
    wild = croniter("*/30 2 * * *", u("2024-03-30T12:00").astimezone(berlin),
                    ret_type=dt.datetime)
    assert wild.get_next(dt.datetime).astimezone(UTC) == u("2024-03-31T01:00")
    assert parse("*/30 2 * * *", "Europe/Berlin").next_after(u("2024-03-30T12:00")) == u(
        "2024-04-01T00:00")


# -- daylight-saving time -----------------------------------------------------------------

# (id, expression, zone, after, expected next slots), all instants in UTC.
DST = [
    # Europe/Berlin 2024: 02:00 CET -> 03:00 CEST on Mar 31 (01:00 UTC),
    # 03:00 CEST -> 02:00 CET on Oct 27 (01:00 UTC).
    ("berlin-fixed-gap", "30 2 * * *", "Europe/Berlin", "2024-03-30T00:00",
     ["2024-03-30T01:30", "2024-03-31T01:00", "2024-04-01T00:30"]),
    ("berlin-fixed-gap-collapses", "0,30 2 * * *", "Europe/Berlin", "2024-03-30T23:00",
     ["2024-03-31T01:00", "2024-04-01T00:00", "2024-04-01T00:30"]),
    ("berlin-fixed-gap-end-is-one-run", "0 2,3 * * *", "Europe/Berlin", "2024-03-30T23:00",
     ["2024-03-31T01:00", "2024-04-01T00:00", "2024-04-01T01:00"]),
    ("berlin-fixed-gap-then-after", "30 2,3 * * *", "Europe/Berlin", "2024-03-30T23:00",
     ["2024-03-31T01:00", "2024-03-31T01:30", "2024-04-01T00:30"]),
    ("berlin-fixed-repeated-once", "30 2 * * *", "Europe/Berlin", "2024-10-26T00:00",
     ["2024-10-26T00:30", "2024-10-27T00:30", "2024-10-28T01:30"]),
    ("berlin-fixed-from-first-copy", "30 2 * * *", "Europe/Berlin", "2024-10-27T00:15",
     ["2024-10-27T00:30", "2024-10-28T01:30"]),
    ("berlin-fixed-from-second-copy", "30 2 * * *", "Europe/Berlin", "2024-10-27T01:15",
     ["2024-10-28T01:30"]),
    ("berlin-wild-hour-repeated", "0 * * * *", "Europe/Berlin", "2024-10-26T23:30",
     ["2024-10-27T00:00", "2024-10-27T01:00", "2024-10-27T02:00"]),
    ("berlin-wild-minute-repeated", "*/30 2 * * *", "Europe/Berlin", "2024-10-26T23:00",
     ["2024-10-27T00:00", "2024-10-27T00:30", "2024-10-27T01:00", "2024-10-27T01:30",
      "2024-10-28T01:00"]),
    ("berlin-wild-from-first-copy", "15,45 * * * *", "Europe/Berlin", "2024-10-27T00:20",
     ["2024-10-27T00:45", "2024-10-27T01:15", "2024-10-27T01:45", "2024-10-27T02:15"]),
    ("berlin-wild-from-second-copy", "15,45 * * * *", "Europe/Berlin", "2024-10-27T01:20",
     ["2024-10-27T01:45", "2024-10-27T02:15"]),
    ("berlin-wild-gap-not-invented", "*/30 2 * * *", "Europe/Berlin", "2024-03-30T23:00",
     ["2024-04-01T00:00", "2024-04-01T00:30"]),
    ("berlin-wild-step-skips-gap", "0 */2 * * *", "Europe/Berlin", "2024-03-30T23:30",
     ["2024-03-31T02:00", "2024-03-31T04:00"]),
    ("berlin-wild-every-minute-gap", "* * * * *", "Europe/Berlin", "2024-03-31T00:58",
     ["2024-03-31T00:59", "2024-03-31T01:00", "2024-03-31T01:01"]),
    # America/New_York 2024: 02:00 EST -> 03:00 EDT on Mar 10 (07:00 UTC),
    # 02:00 EDT -> 01:00 EST on Nov 3 (06:00 UTC).
    ("new-york-fixed-gap", "30 2 * * *", "America/New_York", "2024-03-09T12:00",
     ["2024-03-10T07:00", "2024-03-11T06:30"]),
    ("new-york-fixed-repeated-once", "30 1 * * *", "America/New_York", "2024-11-02T12:00",
     ["2024-11-03T05:30", "2024-11-04T06:30"]),
    ("new-york-wild-repeated", "*/20 1 * * *", "America/New_York", "2024-11-03T04:00",
     ["2024-11-03T05:00", "2024-11-03T05:20", "2024-11-03T05:40", "2024-11-03T06:00",
      "2024-11-03T06:20", "2024-11-03T06:40", "2024-11-04T06:00"]),
    ("new-york-wild-gap", "0 * * * *", "America/New_York", "2024-03-10T06:30",
     ["2024-03-10T07:00", "2024-03-10T08:00"]),
    # Australia/Sydney 2024 (southern): 03:00 AEDT -> 02:00 AEST on Apr 7 (16:00 UTC Apr 6),
    # 02:00 AEST -> 03:00 AEDT on Oct 6 (16:00 UTC Oct 5).
    ("sydney-fixed-repeated-once", "30 2 * * *", "Australia/Sydney", "2024-04-06T00:00",
     ["2024-04-06T15:30", "2024-04-07T16:30"]),
    ("sydney-fixed-gap", "30 2 * * *", "Australia/Sydney", "2024-10-05T00:00",
     ["2024-10-05T16:00", "2024-10-06T15:30"]),
    ("sydney-wild-repeated", "0 * * * *", "Australia/Sydney", "2024-04-06T14:30",
     ["2024-04-06T15:00", "2024-04-06T16:00", "2024-04-06T17:00"]),
    # America/Santiago 2024: clocks change at midnight. 24:00 -03 -> 23:00 -04 on Apr 6
    # (03:00 UTC Apr 7); 00:00 -04 -> 01:00 -03 on Sep 8 (04:00 UTC).
    ("santiago-fixed-midnight-gap", "0 0 * * *", "America/Santiago", "2024-09-07T12:00",
     ["2024-09-08T04:00", "2024-09-09T03:00"]),
    ("santiago-fixed-repeated-once", "30 23 * * *", "America/Santiago", "2024-04-06T12:00",
     ["2024-04-07T02:30", "2024-04-08T03:30"]),
    ("santiago-wild-gap", "30 * * * *", "America/Santiago", "2024-09-08T03:00",
     ["2024-09-08T03:30", "2024-09-08T04:30"]),
    ("santiago-wild-day-starts-in-gap", "0 */3 8 9 *", "America/Santiago", "2024-09-07T12:00",
     ["2024-09-08T06:00", "2024-09-08T09:00"]),
    # Australia/Lord_Howe 2024, a 30-minute shift: 02:00 +11 -> 01:30 +10:30 on Apr 7
    # (15:00 UTC Apr 6); 02:00 +10:30 -> 02:30 +11 on Oct 6 (15:30 UTC Oct 5).
    ("lord-howe-fixed-gap", "15 2 * * *", "Australia/Lord_Howe", "2024-10-05T00:00",
     ["2024-10-05T15:30", "2024-10-06T15:15"]),
    ("lord-howe-fixed-repeated-once", "45 1 * * *", "Australia/Lord_Howe", "2024-04-06T00:00",
     ["2024-04-06T14:45", "2024-04-07T15:15"]),
    ("lord-howe-wild-repeated", "*/15 1 * * *", "Australia/Lord_Howe", "2024-04-06T14:00",
     ["2024-04-06T14:15", "2024-04-06T14:30", "2024-04-06T14:45", "2024-04-06T15:00",
      "2024-04-06T15:15", "2024-04-07T14:30"]),
    ("lord-howe-wild-gap", "0,30 * * * *", "Australia/Lord_Howe", "2024-10-05T15:00",
     ["2024-10-05T15:30", "2024-10-05T16:00"]),
    ("lord-howe-wild-hour-after-gap", "*/10 6 * * *", "Australia/Lord_Howe",
     "2024-10-05T00:00", ["2024-10-05T19:00", "2024-10-05T19:10"]),
    # Europe/Moscow: 02:00 +03 -> 03:00 +04 on 2011-03-27, then no fall-back in 2011;
    # 02:00 +04 -> 01:00 +03 on 2014-10-26 (22:00 UTC Oct 25).
    ("moscow-2011-gap", "0 2 * * *", "Europe/Moscow", "2011-03-26T00:00",
     ["2011-03-26T23:00", "2011-03-27T22:00"]),
    ("moscow-2011-no-fall-back", "0 2 * * *", "Europe/Moscow", "2011-10-29T00:00",
     ["2011-10-29T22:00", "2011-10-30T22:00", "2011-10-31T22:00"]),
    ("moscow-2014-fixed-repeated-once", "30 1 * * *", "Europe/Moscow", "2014-10-25T00:00",
     ["2014-10-25T21:30", "2014-10-26T22:30"]),
    ("moscow-2014-wild-repeated", "*/30 1 * * *", "Europe/Moscow", "2014-10-25T20:00",
     ["2014-10-25T21:00", "2014-10-25T21:30", "2014-10-25T22:00", "2014-10-25T22:30",
      "2014-10-26T22:00"]),
    # Pacific/Apia skipped 2011-12-30: 23:59:59 -10 on the 29th -> 00:00 +14 on the 31st
    # (10:00 UTC Dec 30).
    ("apia-fixed-skipped-day", "0 12 * * *", "Pacific/Apia", "2011-12-29T00:00",
     ["2011-12-29T22:00", "2011-12-30T10:00", "2011-12-30T22:00"]),
    ("apia-wild-skipped-day", "0 * * * *", "Pacific/Apia", "2011-12-30T09:30",
     ["2011-12-30T10:00", "2011-12-30T11:00"]),
    # America/Sao_Paulo: 00:00 -03 -> 01:00 -02 on 2018-11-04; 24:00 -02 -> 23:00 -03 on
    # 2019-02-16; no daylight-saving time since 2019.
    ("sao-paulo-2018-gap", "0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00",
     ["2018-11-04T03:00", "2018-11-05T02:00"]),
    ("sao-paulo-2019-repeated-once", "30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00",
     ["2019-02-17T01:30", "2019-02-18T02:30"]),
    ("sao-paulo-2019-abolished", "0 0 * * *", "America/Sao_Paulo", "2019-11-02T12:00",
     ["2019-11-03T03:00", "2019-11-04T03:00"]),
]

# Rows where cronsim departs from Debian's cron (see test_dst_rows_agree_with_cronsim).
CRONSIM_QUIRKS = {
    # cronsim's wildcard iteration starts the day at 00:00 even when that time does not
    # exist, and returns the non-existent 00:00 -04 (= 04:00 UTC) as a slot.
    "santiago-wild-day-starts-in-gap",
    # cronsim advances a wildcard job's hour in steps of 3600 s; across a 30-minute shift
    # that lands on 06:30 and loses 06:00-06:20.
    "lord-howe-wild-hour-after-gap",
}


@pytest.mark.parametrize(("expression", "zone", "after", "expected"),
                         [row[1:] for row in DST], ids=[row[0] for row in DST])
def test_dst(expression: str, zone: str, after: str, expected: list[str]) -> None:
    schedule = parse(expression, zone)
    slots = take(schedule, u(after), len(expected))
    assert slots == [u(e) for e in expected]
    # The same slots again, one at a time and as a window.
    assert [schedule.next_after(s) for s in [u(after), *slots[:-1]]] == slots
    assert list(schedule.between(u(after), slots[-1])) == slots


@pytest.mark.parametrize(("name", "expression", "zone", "after", "expected"), DST,
                         ids=[row[0] for row in DST])
def test_dst_rows_agree_with_cronsim(name: str, expression: str, zone: str, after: str,
                                     expected: list[str]) -> None:
    raw = itertools.islice(CronSim(expression, u(after).astimezone(ZoneInfo(zone))),
                           len(expected) + 3)
    # cronsim returns first-copy slots, earlier than the start, for a fixed-time job
    # started in the second copy of a repeated hour ("berlin-fixed-from-second-copy").
    theirs = [c.astimezone(UTC) for c in raw if c.astimezone(UTC) > u(after)]
    theirs = theirs[: len(expected)]
    if name in CRONSIM_QUIRKS:
        assert theirs != [u(e) for e in expected]
    else:
        assert theirs == [u(e) for e in expected]


def test_berlin_fall_back_night_runs_a_fixed_job_exactly_once() -> None:
    schedule = parse("30 2 * * *", "Europe/Berlin")
    night = list(schedule.between(u("2024-10-26T20:00"), u("2024-10-27T08:00")))
    assert night == [u("2024-10-27T00:30")]
    assert [s.astimezone(ZoneInfo("Europe/Berlin")).isoformat() for s in night] == [
        "2024-10-27T02:30:00+02:00"]


def test_berlin_fall_back_night_runs_a_wildcard_job_in_both_hours() -> None:
    schedule = parse("* 2 * * *", "Europe/Berlin")
    night = list(schedule.between(u("2024-10-26T20:00"), u("2024-10-27T08:00")))
    assert len(night) == 120
    assert night[0] == u("2024-10-27T00:00")
    assert night[-1] == u("2024-10-27T01:59")
    spring = list(schedule.between(u("2024-03-30T20:00"), u("2024-03-31T08:00")))
    assert spring == []


def test_a_gap_ending_between_whole_minutes_keeps_its_run() -> None:
    # Africa/Monrovia moved from -00:44:30 to UTC at 00:44:30 UTC on 1972-01-07: wall
    # clock 00:00:00 -> 00:44:30. Midnight was skipped; its run is at the first whole
    # minute after the gap, 00:45, whichever instant the search starts from.
    schedule = parse("0 0 * * *", "Africa/Monrovia")
    night = [u("1972-01-06T00:44:30"), u("1972-01-07T00:45"), u("1972-01-08T00:00")]
    assert take(schedule, u("1972-01-05T12:00"), 3) == night
    for start in ["1972-01-07T00:44:29", "1972-01-07T00:44:30", "1972-01-07T00:44:45"]:
        assert schedule.next_after(u(start)) == u("1972-01-07T00:45")
    assert schedule.next_after(u("1972-01-07T00:45")) == u("1972-01-08T00:00")
    assert schedule.latest_at_or_before(u("1972-01-07T00:44:59")) == u("1972-01-06T00:44:30")
    assert schedule.latest_at_or_before(u("1972-01-07T00:45")) == u("1972-01-07T00:45")


# -- between ------------------------------------------------------------------------------


def test_between_is_half_open() -> None:
    schedule = parse("0 * * * *")
    slots = list(schedule.between(u("2024-01-01T00:00"), u("2024-01-01T03:00")))
    assert slots == [u("2024-01-01T01:00"), u("2024-01-01T02:00"), u("2024-01-01T03:00")]
    assert list(schedule.between(u("2024-01-01T03:00"), u("2024-01-01T03:00"))) == []
    assert list(schedule.between(u("2024-01-01T03:00"), u("2024-01-01T01:00"))) == []
    assert list(schedule.between(u("2024-01-01T00:30"), u("2024-01-01T00:59"))) == []


def test_between_across_both_transitions_of_a_year() -> None:
    for expression in ["30 2 * * *", "*/30 2 * * *", "0 * * * *", "0-59/7 1-3 * * *"]:
        schedule = parse(expression, "Europe/Berlin")
        after, until = u("2024-01-01T00:00"), u("2025-01-01T00:00")
        window = list(schedule.between(after, until))
        walked = []
        for slot in schedule.iter_after(after):
            if slot > until:
                break
            walked.append(slot)
        assert window == walked
        assert len(set(window)) == len(window)
        assert all(a < b for a, b in itertools.pairwise(window))
        assert all(after < s <= until for s in window)
    assert len(list(parse("30 2 * * *", "Europe/Berlin").between(
        u("2024-01-01T00:00"), u("2025-01-01T00:00")))) == 366


# -- latest_at_or_before -----------------------------------------------------------------


def test_latest_at_or_before_includes_the_instant() -> None:
    schedule = parse("0 3 * * *")
    assert schedule.latest_at_or_before(u("2024-01-02T03:00")) == u("2024-01-02T03:00")
    tiny = dt.timedelta(microseconds=1)
    assert schedule.latest_at_or_before(u("2024-01-02T03:00") - tiny) == u("2024-01-01T03:00")
    assert schedule.latest_at_or_before(u("2024-01-02T03:00") + tiny) == u("2024-01-02T03:00")
    tokyo = ZoneInfo("Asia/Tokyo")  # 11:59 JST is 02:59 UTC
    slot = schedule.latest_at_or_before(dt.datetime(2024, 1, 2, 11, 59, tzinfo=tokyo))
    assert slot == u("2024-01-01T03:00")
    assert slot is not None
    assert slot.tzinfo is UTC


def test_latest_at_or_before_after_a_long_outage() -> None:
    # One step back, however many slots there were since.
    assert parse("*/5 * * * *").latest_at_or_before(u("2024-06-01T12:34:56")) == u(
        "2024-06-01T12:30")
    assert parse("0 0 1 * mon").latest_at_or_before(u("2024-06-01T12:00")) == u(
        "2024-06-01T00:00")
    assert parse("0 0 1 * mon").latest_at_or_before(u("2024-05-31T12:00")) == u(
        "2024-05-27T00:00")
    # The longest wait there is: Sunday 29 February, 2088 then 2128.
    sundays = parse("0 0 29 2 */7")
    assert sundays.latest_at_or_before(u("2128-02-28T23:59")) == u("2088-02-29T00:00")
    assert sundays.latest_at_or_before(u("2128-02-29T00:00")) == u("2128-02-29T00:00")
    # H: the same slot as going forwards.
    hashed = parse("H H * * *", "Europe/Berlin", hash_key="billing")
    slot = hashed.latest_at_or_before(u("2024-03-01T00:00"))
    assert slot is not None
    assert hashed.next_after(slot - dt.timedelta(microseconds=1)) == slot
    assert hashed.next_after(slot) > u("2024-03-01T00:00")


def test_latest_at_or_before_is_none_before_the_first_slot() -> None:
    assert parse("0 12 * * *").latest_at_or_before(u("0001-01-01T06:00")) is None
    for instant in ["0001-01-01T00:00", "0001-01-01T06:00"]:
        assert parse("0 12 * * *", "America/New_York").latest_at_or_before(u(instant)) is None
    assert parse("0 0 1 1 *").latest_at_or_before(u("0001-01-01T00:00")) == u(
        "0001-01-01T00:00")
    assert parse("0 0 * * *").latest_at_or_before(u("0001-01-02T00:00")) == u(
        "0001-01-02T00:00")


def test_latest_at_or_before_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="naive"):
        parse("0 3 * * *").latest_at_or_before(dt.datetime(2024, 1, 1))


LATEST_DST = [
    # (id, expression, zone, instant, latest slot at or before it), all in UTC.
    # Europe/Berlin: 03:00 CEST -> 02:00 CET at 01:00 UTC on 2024-10-27.
    ("fixed-in-second-copy", "30 2 * * *", "Europe/Berlin", "2024-10-27T01:45",
     "2024-10-27T00:30"),
    ("fixed-between-the-copies", "30 2 * * *", "Europe/Berlin", "2024-10-27T01:15",
     "2024-10-27T00:30"),
    ("wild-second-copy-reached", "30 * * * *", "Europe/Berlin", "2024-10-27T01:45",
     "2024-10-27T01:30"),
    ("wild-second-copy-of-earlier-minute", "0,30 * * * *", "Europe/Berlin",
     "2024-10-27T01:10", "2024-10-27T01:00"),
    ("wild-first-copy", "0,30 * * * *", "Europe/Berlin", "2024-10-27T00:45",
     "2024-10-27T00:30"),
    ("wild-just-into-second-copy", "1 * * * *", "Europe/Berlin", "2020-10-25T01:00:28",
     "2020-10-25T00:01"),
    # 02:00 CET -> 03:00 CEST at 01:00 UTC on 2024-03-31.
    ("fixed-gap-end", "30 2 * * *", "Europe/Berlin", "2024-03-31T01:00", "2024-03-31T01:00"),
    ("fixed-before-gap", "30 2 * * *", "Europe/Berlin", "2024-03-31T00:59",
     "2024-03-30T01:30"),
    ("wild-gap-not-invented", "*/30 2 * * *", "Europe/Berlin", "2024-03-31T12:00",
     "2024-03-30T01:30"),
    # Pacific/Apia skipped 2011-12-30 (10:00 UTC): a fixed job runs once, at the end.
    ("apia-fixed-skipped-day", "0 12 * * *", "Pacific/Apia", "2011-12-30T21:00",
     "2011-12-30T10:00"),
    # Australia/Lord_Howe: 02:00 +11 -> 01:30 +10:30 at 15:00 UTC on 2024-04-06.
    ("lord-howe-wild-second-copy", "*/15 1 * * *", "Australia/Lord_Howe",
     "2024-04-06T15:20", "2024-04-06T15:15"),
    ("lord-howe-fixed-second-copy", "45 1 * * *", "Australia/Lord_Howe",
     "2024-04-06T15:20", "2024-04-06T14:45"),
]


@pytest.mark.parametrize(("expression", "zone", "instant", "expected"),
                         [row[1:] for row in LATEST_DST], ids=[row[0] for row in LATEST_DST])
def test_latest_at_or_before_across_dst(expression: str, zone: str, instant: str,
                                        expected: str) -> None:
    schedule = parse(expression, zone)
    assert schedule.latest_at_or_before(u(instant)) == u(expected)
    assert schedule.next_after(u(expected)) > u(instant)


@pytest.mark.parametrize(("expression", "zone", "after", "expected"),
                         [row[1:] for row in DST], ids=[row[0] for row in DST])
def test_latest_at_or_before_walks_the_dst_rows_back(expression: str, zone: str, after: str,
                                                     expected: list[str]) -> None:
    schedule = parse(expression, zone)
    slots = [u(e) for e in expected]
    tiny = dt.timedelta(microseconds=1)
    assert [schedule.latest_at_or_before(s) for s in slots] == slots
    assert [schedule.latest_at_or_before(s - tiny) for s in slots[1:]] == slots[:-1]
    before = schedule.latest_at_or_before(slots[0] - tiny)
    assert before is not None
    assert before <= u(after)
    assert schedule.next_after(before) == slots[0]


# -- property tests -----------------------------------------------------------------------

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Europe/Moscow",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "America/Havana",
    "Asia/Kolkata",
    "Asia/Tehran",
]

FIELDS = [  # (low, high, names, base of names)
    (0, 59, (), 0),
    (0, 23, (), 0),
    (1, 31, (), 0),
    (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
             "dec"), 1),
    (0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat"), 0),
]


@functools.cache
def transitions(zone: str) -> list[dt.datetime]:
    """The instants in 2020-2030 at which ``zone`` changes its UTC offset."""
    z = ZoneInfo(zone)
    found = []
    day = dt.timedelta(days=1)
    t = u("2020-01-01T00:00")
    while t.year < 2031:
        if (t + day).astimezone(z).utcoffset() != t.astimezone(z).utcoffset():
            low, high = t, t + day
            while high - low > dt.timedelta(minutes=1):
                middle = low + (high - low) / 2
                if middle.astimezone(z).utcoffset() == low.astimezone(z).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high)
        t += day
    return found


@st.composite
def field_text(draw: st.DrawFn, index: int) -> tuple[str, frozenset[int]]:
    """One field (text and the values it means, computed here independently)."""
    low, high, names, base = FIELDS[index]
    if index == 1 and draw(st.booleans()):
        high = 4  # hours around the usual transitions, more often
    pieces = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        value = st.integers(low, high)
        kind = draw(st.sampled_from(["*", "n", "a-b", "*/n", "a-b/n", "a/n"]))

        def show(v: int) -> str:
            if names and 0 <= v - base < len(names) and draw(st.booleans()):
                return names[v - base]
            return str(v)

        if kind == "*":
            text, span = "*", range(FIELDS[index][0], FIELDS[index][1] + 1)
        elif kind == "n":
            v = draw(value)
            text, span = show(v), range(v, v + 1)
        elif kind == "*/n":
            step = draw(st.integers(1, FIELDS[index][1] - FIELDS[index][0] + 2))
            text, span = f"*/{step}", range(FIELDS[index][0], FIELDS[index][1] + 1, step)
        elif kind == "a/n":
            v, step = draw(value), draw(st.integers(1, 12))
            text, span = f"{v}/{step}", range(v, FIELDS[index][1] + 1, step)
        else:
            # a < b strictly: cronsim reads a one-value range with a step, '5-5/3', as
            # '5/3' (5 up to the maximum), where Debian's cron and cronjobs read {5}.
            a, b = sorted(draw(st.lists(value, min_size=2, max_size=2, unique=True)))
            step = draw(st.integers(1, 12)) if kind == "a-b/n" else 1
            text = f"{show(a)}-{show(b)}" + (f"/{step}" if kind == "a-b/n" else "")
            span = range(a, b + 1, step)
        pieces.append(text)
        values.update(span)
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return ",".join(pieces), frozenset(values)


@st.composite
def expressions(draw: st.DrawFn) -> tuple[str, tuple[frozenset[int], ...], bool]:
    """A 5-field expression, its values per field, and whether the day fields AND."""
    fields = [draw(field_text(i)) for i in range(5)]
    # Fixed-time jobs are where the DST rules differ most: make them common.
    if draw(st.booleans()):
        fields[0] = (str(m := draw(st.integers(0, 59))), frozenset({m}))
    texts = [f[0] for f in fields]
    day_and = texts[2].startswith("*") or texts[4].startswith("*")
    return " ".join(texts), tuple(f[1] for f in fields), day_and


@st.composite
def starts(draw: st.DrawFn, zone: str) -> dt.datetime:
    near = transitions(zone)
    if len(near) > 0 and draw(st.booleans()):
        instant: dt.datetime = draw(st.sampled_from(near))
        return instant + dt.timedelta(seconds=draw(st.integers(-3 * 3600, 3 * 3600)))
    return u("2020-01-01T00:00") + dt.timedelta(
        seconds=draw(st.integers(0, 11 * 365 * 86400)),
        microseconds=draw(st.sampled_from([0, 0, 1, 999_999])))


@st.composite
def cases(draw: st.DrawFn) -> tuple[Schedule, tuple[frozenset[int], ...], bool, dt.datetime]:
    expression, values, day_and = draw(expressions())
    zone = draw(st.sampled_from(ZONES))
    try:
        schedule = parse(expression, zone)
    except ScheduleError as exc:
        assert "never fires" in exc.message
        assume(False)
        raise
    return schedule, values, day_and, draw(starts(zone))


def is_imaginary(local: dt.datetime) -> bool:
    return local != local.astimezone(UTC).astimezone(local.tzinfo)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_agrees_with_cronsim(case: tuple[Schedule, tuple[frozenset[int], ...], bool,
                                         dt.datetime]) -> None:
    schedule, _, _, start = case
    zone = ZoneInfo(schedule.timezone)
    # Known cronsim departures from Debian's cron, excluded narrowly:
    # - for a wildcard job it advances the hour in steps of 3600 s, which across the
    #   30-minute shift of Lord Howe Island lands on :30 and loses the minutes before
    #   (see "lord-howe-wild-hour-after-gap"); tested against brute force below instead.
    assume(not (schedule.is_wildcard and schedule.timezone == "Australia/Lord_Howe"))
    # - for a fixed-time job started in the second copy of a repeated hour it returns
    #   first-copy slots, which are before the start: skip those (at most the matching
    #   minutes of one hour).
    raw = itertools.islice(CronSim(schedule.expression, start.astimezone(zone)), 100)
    later = itertools.islice((c for c in raw if c.astimezone(UTC) > start), 10)
    theirs = list(later)
    # - for a wildcard job whose day starts inside a gap (a midnight transition, as in
    #   Santiago or Havana) it returns the non-existent midnight as a slot
    #   (see "santiago-wild-day-starts-in-gap").
    assume(not any(is_imaginary(c) for c in theirs))
    assert take(schedule, start, 10) == [c.astimezone(UTC) for c in theirs]


def spec_fields(schedule: Schedule) -> list[frozenset[int]]:
    """The values of each field that the matcher iterates."""
    spec = schedule._spec
    return [frozenset(spec.minutes), frozenset(spec.hours), spec.doms,
            frozenset(spec.months), spec.dows]


def croniter_fields(schedule: Schedule) -> list[frozenset[int]]:
    """croniter's reading of the expression the schedule hands it."""
    expanded = croniter.expand(schedule._compiled.cron_expression)[0]
    return [croniter_set(index, raw) for index, raw in enumerate(expanded)]


H_FORMS = [["H", "H/15", "H(0-29)", "H(10-50)/7"], ["H", "H(2-5)/2", "H/6"], ["H", "H(1-9)"],
           ["H", "H/3"], ["H", "H(1-5)"]]


@st.composite
def oracle_cases(draw: st.DrawFn) -> tuple[Schedule, dt.datetime]:
    """A schedule, H fields included, and a wall-clock minute from 1900 to 2200."""
    expression, _, _ = draw(expressions())
    texts = expression.split(" ")
    for index in draw(st.sets(st.integers(0, 4), max_size=2)):
        texts[index] = draw(st.sampled_from(H_FORMS[index]))
    key = draw(st.text("abcdefghij-", min_size=1, max_size=6))
    try:
        schedule = parse(" ".join(texts), hash_key=key)
    except ScheduleError as exc:
        assert "never fires" in exc.message
        assume(False)
        raise
    start = dt.datetime(1900, 1, 1) + dt.timedelta(minutes=draw(st.integers(0, 300 * 525_960)))
    return schedule, start


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(oracle_cases())
def test_matching_wall_times_agree_with_croniter(case: tuple[Schedule, dt.datetime]) -> None:
    """The matcher finds the wall-clock minutes croniter finds for the expression it is
    handed (Debian's reading, corrections 1-6), forward and back, the start included."""
    schedule, start = case
    assert croniter_fields(schedule) == spec_fields(schedule)
    handed, day_or = schedule._compiled.cron_expression, schedule._spec.day_or
    forward = croniter(handed, start - dt.timedelta(minutes=1), ret_type=dt.datetime,
                       day_or=day_or)
    theirs = [forward.get_next(dt.datetime) for _ in range(12)]
    assert list(itertools.islice(walls(schedule._spec, start), 12)) == theirs
    backward = croniter(handed, start + dt.timedelta(minutes=1), ret_type=dt.datetime,
                        day_or=day_or)
    theirs = [backward.get_prev(dt.datetime) for _ in range(12)]
    assert list(itertools.islice(walls(schedule._spec, start, backward=True), 12)) == theirs


def matches(values: tuple[frozenset[int], ...], day_and: bool, wall: dt.datetime) -> bool:
    minutes, hours, doms, months, dows = values
    dom_ok = wall.day in doms
    dow_ok = (wall.weekday() + 1) % 7 in dows
    day_ok = (dom_ok and dow_ok) if day_and else (dom_ok or dow_ok)
    return wall.minute in minutes and wall.hour in hours and wall.month in months and day_ok


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_brute_force(case: tuple[Schedule, tuple[frozenset[int], ...], bool,
                                 dt.datetime]) -> None:
    """Every slot in a 30-hour window, found by trying each minute of it."""
    schedule, values, day_and, start = case
    zone = ZoneInfo(schedule.timezone)
    until = start + dt.timedelta(hours=30)
    minute = dt.timedelta(minutes=1)
    expected: set[dt.datetime] = set()
    if schedule.is_wildcard:
        # The instants at which the wall clock shows a matching minute.
        t = start.replace(second=0, microsecond=0)
        while t <= until:
            if matches(values, day_and, t.astimezone(zone)):
                expected.add(t)
            t += minute
    else:
        # Each matching wall time once, on its first occurrence; a skipped one at the
        # first existing minute after it.
        wall = (start.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
                - dt.timedelta(hours=27))
        end = until.astimezone(zone).replace(tzinfo=None) + dt.timedelta(hours=1)
        while wall <= end:
            if matches(values, day_and, wall):
                real = wall
                while is_imaginary(real.replace(tzinfo=zone)):
                    real += minute
                expected.add(real.replace(tzinfo=zone).astimezone(UTC))
            wall += minute
    wanted = sorted(s for s in expected if start < s <= until)
    assert list(schedule.between(start, until)) == wanted


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(0, 10**6))
def test_iteration_is_consistent(case: tuple[Schedule, tuple[frozenset[int], ...], bool,
                                             dt.datetime], seed: int) -> None:
    """Restarting from any instant gives the same slots: none twice, none skipped."""
    schedule, _, _, start = case
    slots = take(schedule, start, 8)
    assert len(slots) == 8
    assert all(s.tzinfo is UTC for s in slots)
    assert all(a < b for a, b in itertools.pairwise([start, *slots]))
    tiny = dt.timedelta(microseconds=1)
    previous = start
    for i, slot in enumerate(slots):
        assert schedule.next_after(previous) == slot
        assert schedule.next_after(slot - tiny) == slot
        inside = previous + (slot - previous) * ((seed + i) % 997) / 997
        if inside < slot:
            assert schedule.next_after(inside) == slot
        assert take(schedule, slot, 8 - i - 1) == slots[i + 1:]
        previous = slot
    assert list(schedule.between(start, slots[-1])) == slots
    assert list(schedule.between(slots[1], slots[5])) == slots[2:6]
    # The input may be in any zone.
    assert take(schedule, start.astimezone(ZoneInfo("Asia/Kathmandu")), 8) == slots


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(1, 3 * 24 * 60))
def test_latest_at_or_before_is_the_last_slot_of_a_window(
        case: tuple[Schedule, tuple[frozenset[int], ...], bool, dt.datetime],
        window_minutes: int) -> None:
    """latest_at_or_before(t) is the last of between(t - window, t) when there is one."""
    schedule, _, _, instant = case
    latest = schedule.latest_at_or_before(instant)
    assert latest is not None
    assert latest <= instant
    assert latest.tzinfo is UTC
    # Nothing between it and the instant, and it is a slot.
    assert schedule.next_after(latest) > instant
    assert schedule.next_after(latest - dt.timedelta(microseconds=1)) == latest
    window = list(schedule.between(instant - dt.timedelta(minutes=window_minutes), instant))
    if window:
        assert latest == window[-1]
    else:
        assert latest <= instant - dt.timedelta(minutes=window_minutes)
    # The same from the instant in another zone, and from the slot itself.
    assert schedule.latest_at_or_before(instant.astimezone(ZoneInfo("Asia/Kathmandu"))) == latest
    assert schedule.latest_at_or_before(latest) == latest
