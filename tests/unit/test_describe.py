"""Schedules in words: cronjobs.cron.describe.describe(expression, tz, name=...)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronjobs.cron import parse
from cronjobs.cron.describe import compact, describe, describe_schedule
from cronjobs.cron.fields import DAY_OF_WEEK, MINUTE
from cronjobs.errors import ScheduleError

WORDS = [
    # the examples of the issue
    ("0 3 L * *", "Europe/Berlin", "At 03:00 on the last day of the month (Europe/Berlin)"),
    ("*/15 9-17 * * 1-5", "UTC",
     "Every 15 minutes, between 09:00 and 17:59, Monday through Friday (UTC)"),
    # plain schedules: cron-descriptor's wording
    ("30 2 * * *", "America/New_York", "At 02:30 (America/New_York)"),
    ("* * * * *", "UTC", "Every minute (UTC)"),
    ("*/5 * * * *", "UTC", "Every 5 minutes (UTC)"),
    ("0 9-17/2 * * *", "UTC", "Every 2 hours, between 09:00 and 17:59 (UTC)"),
    ("0 0 1,15 * *", "UTC", "At 00:00 on day 1 and 15 of the month (UTC)"),
    ("0 0 1 jan-mar *", "UTC", "At 00:00 on day 1 of the month, January through March (UTC)"),
    # macros are their expressions
    ("@daily", "UTC", "At 00:00 (UTC)"),
    ("@hourly", "Asia/Kolkata", "Every hour (Asia/Kolkata)"),
    ("@weekly", "UTC", "At 00:00, only on Sunday (UTC)"),
    ("@monthly", "UTC", "At 00:00 on day 1 of the month (UTC)"),
    ("@YEARLY", "UTC", "At 00:00 on day 1 of the month, only in January (UTC)"),
    # Debian's day rule: 'or' when either day matches, 'and only' when both must
    ("0 0 1 * mon", "UTC", "At 00:00 on day 1 of the month, or on Monday (UTC)"),
    ("0 0 */2 * mon", "UTC", "At 00:00, every 2 days, and only on Monday (UTC)"),
    ("0 6 1-7 * */7", "UTC",
     "At 06:00, between day 1 and 7 of the month, and only on Sunday (UTC)"),
    ("0 0 * * */2", "UTC",
     "At 00:00, only on Sunday, Tuesday, Thursday, and Saturday (UTC)"),
    ("0 0 1-31 * 1,*/2", "UTC", "At 00:00 (UTC)"),  # every day: Debian ORs a full field
    ("0 0 * * */2,5L", "UTC", "At 00:00 on every Sunday, every Tuesday, every Thursday, every "
                              "Saturday and the last Friday of the month (UTC)"),
    ("0 0 * * *,5L", "UTC", "At 00:00 (UTC)"),
    ("0 0 30 2 mon", "UTC", "At 00:00, only on Monday, only in February (UTC)"),
    # as Debian reads the fields (croniter's corrections)
    ("5-5 * * * *", "UTC", "At 5 minutes past the hour (UTC)"),
    ("0 0 * * mon/2", "UTC", "At 00:00, every 2 days of the week, Monday through Sunday (UTC)"),
    # the day extensions
    ("0 0 L-1 * *", "UTC", "At 00:00, 1 day before the last day of the month (UTC)"),
    ("0 0 L-3 * *", "UTC", "At 00:00, 3 days before the last day of the month (UTC)"),
    ("0 0 1W * *", "UTC", "At 00:00 on the first weekday of the month (UTC)"),
    ("0 0 15W * *", "UTC", "At 00:00 on the weekday nearest day 15 of the month (UTC)"),
    ("0 0 LW * *", "UTC", "At 00:00 on the last weekday of the month (UTC)"),
    ("0 0 * * fri#3", "UTC", "At 00:00 on the third Friday of the month (UTC)"),
    ("0 0 * * 1#1", "UTC", "At 00:00 on the first Monday of the month (UTC)"),
    ("0 0 * * 5L", "UTC", "At 00:00 on the last Friday of the month (UTC)"),
    ("30 2 * * sunL", "Europe/Berlin",
     "At 02:30 on the last Sunday of the month (Europe/Berlin)"),
    ("0 0 * 2 fri#5", "UTC", "At 00:00 on the fifth Friday of the month, only in February (UTC)"),
    ("0 0 1,15,L * *", "UTC", "At 00:00 on day 1, day 15 and the last day of the month (UTC)"),
    ("0 0 1-5,L * *", "UTC",
     "At 00:00 on days 1 through 5 and the last day of the month (UTC)"),
    ("0 0 */10,L * *", "UTC", "At 00:00 on every 10th day and the last day of the month (UTC)"),
    ("0 0 L-1,L * *", "UTC",
     "At 00:00 on 1 day before the last day and the last day of the month (UTC)"),
    ("0 0 * * mon#1,fri#3", "UTC",
     "At 00:00 on the first Monday and the third Friday of the month (UTC)"),
    ("0 0 * * mon,5L", "UTC",
     "At 00:00 on every Monday and the last Friday of the month (UTC)"),
    ("0 0 L * fri", "UTC", "At 00:00 on the last day of the month, or on Friday (UTC)"),
    ("0 0 15W * 1#1", "UTC", "At 00:00 on the weekday nearest day 15 of the month, or on the "
                             "first Monday of the month (UTC)"),
    ("0 0 */2 * fri#3", "UTC",
     "At 00:00, every 2 days, and only on the third Friday of the month (UTC)"),
]


@pytest.mark.parametrize(("expression", "zone", "words"), WORDS)
def test_descriptions(expression: str, zone: str, words: str) -> None:
    assert describe(expression, zone) == words
    assert describe_schedule(parse(expression, zone, hash_key="any")) == words


def test_h_says_what_it_picked_and_that_it_is_fixed() -> None:
    minute = min(parse("H * * * *", hash_key="billing").values(0))
    assert describe("H * * * *", "UTC", name="billing") == (
        f"Once an hour, at minute {minute} (fixed for this job) (UTC)")
    hashed = parse("H H * * *", hash_key="billing")
    hour, minute_ = sorted(hashed.values(1))[0], sorted(hashed.values(0))[0]
    assert describe("H H * * *", name="billing") == (
        f"At {hour:02}:{minute_:02} (fixed for this job) (UTC)")
    # Each name its own: the description follows the job's H, not the text.
    assert len({describe("H * * * *", name=f"job-{i}") for i in range(20)}) > 5
    quarter = parse("H/15 * * * *", hash_key="x").values(0)
    first = min(quarter)
    assert describe("H/15 * * * *", name="x") == (
        f"Every 15 minutes, starting at {first} minutes past the hour (fixed for this job) "
        "(UTC)")
    day = min(parse("0 0 H * *", hash_key="x").values(2))
    assert describe("0 0 H * 5L", name="x") == (
        f"At 00:00 on day {day} of the month (fixed for this job), or on the last Friday of "
        "the month (UTC)")
    # An H that covers the whole field is '*': nothing about it is fixed.
    assert describe("H/1 * * * *", name="x") == "Every minute (UTC)"


def test_invalid_input_raises_the_usual_schedule_error() -> None:
    for expression, zone in [("0 0 * * fri#6", "UTC"), ("61 * * * *", "UTC"),
                             ("@daily", "Mars/Base"), ("0 0 31W 2 *", "UTC")]:
        with pytest.raises(ScheduleError) as described:
            describe(expression, zone)
        with pytest.raises(ScheduleError) as parsed:
            parse(expression, zone)
        assert described.value.message == parsed.value.message


def test_compact() -> None:
    assert compact(frozenset(range(60)), MINUTE) == "*"
    assert compact(frozenset({7}), MINUTE) == "7"
    assert compact(frozenset({7, 22, 37, 52}), MINUTE) == "7/15"
    assert compact(frozenset({4, 14, 24}), MINUTE) == "4,14,24"
    assert compact(frozenset(range(9, 18)), MINUTE) == "9-17"
    assert compact(frozenset({0, 2, 4, 6}), DAY_OF_WEEK) == "0,2,4,6"
    assert compact(frozenset(range(7)), DAY_OF_WEEK) == "*"


@st.composite
def valid_expressions(draw: st.DrawFn) -> str:
    minute = draw(st.sampled_from(["0", "*/5", "H", "H/15", "1,31", "5-10", "*", "59/15"]))
    hour = draw(st.sampled_from(["0", "*", "H", "9-17", "*/2", "1,13", "H(2-5)"]))
    dom = draw(st.sampled_from(["*", "1", "L", "L-2", "15W", "LW", "1,15,L", "*/2", "H",
                                "1-7", "31", "L,5W"]))
    month = draw(st.sampled_from(["*", "2", "jan-mar", "*/3", "H", "4,6"]))
    dow = draw(st.sampled_from(["*", "mon-fri", "fri#3", "5L", "mon#1,fri#3", "*/2", "0",
                                "7", "1,5L", "sun#5", "H"]))
    return f"{minute} {hour} {dom} {month} {dow}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_expressions(), st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
       st.text("abcxyz-", min_size=1, max_size=5))
def test_every_valid_schedule_has_a_one_line_description(expression: str, zone: str,
                                                         name: str) -> None:
    try:
        parse(expression, zone, hash_key=name)
    except ScheduleError as exc:
        assert "never fires" in exc.message
        assume(False)
    words = describe(expression, zone, name=name)
    assert words.endswith(f" ({zone})")
    assert words[:1].isupper()
    assert "\n" not in words and "  " not in words
    # No cron syntax leaks through: L, W and # are said in words.
    assert "#" not in words
    assert not re.search(r"\b(L|LW|\d+W|L-\d+|\d+L)\b", words), words
    assert ("(fixed for this job)" in words) == ("H" in expression), words
