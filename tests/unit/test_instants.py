import datetime as dt
import zoneinfo

import pytest

from cronjobs.errors import UsageError
from cronjobs.instants import parse_instant
from cronjobs.validation import parse_payload

UTC = dt.UTC
NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("2026-03-29T01:30:00Z", {}, dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)),
        ("2026-03-29T02:30:00+01:00", {}, dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC)),
        ("2026-11-20T10:00", {"zone": BERLIN}, dt.datetime(2026, 11, 20, 9, 0, tzinfo=UTC)),
        ("2026-11-20", {}, dt.datetime(2026, 11, 20, tzinfo=UTC)),
        ("2026-11-20", {"end": True},
         dt.datetime(2026, 11, 20, 23, 59, 59, 999999, tzinfo=UTC)),
        ("2026-11-20", {"zone": BERLIN}, dt.datetime(2026, 11, 19, 23, 0, tzinfo=UTC)),
        # the day the clocks go back has 25 hours in Berlin
        ("2026-10-25", {"zone": BERLIN, "end": True},
         dt.datetime(2026, 10, 25, 22, 59, 59, 999999, tzinfo=UTC)),
        ("2h", {"now": lambda: NOW}, NOW - dt.timedelta(hours=2)),
        ("1d12h", {"now": lambda: NOW}, NOW - dt.timedelta(hours=36)),
        # now, and a duration from now: a sign says which way, else the option's way
        ("now", {"now": lambda: NOW}, NOW),
        (" NOW ", {"now": lambda: NOW, "towards": "future"}, NOW),
        ("-2d", {"now": lambda: NOW}, NOW - dt.timedelta(days=2)),
        ("+2h", {"now": lambda: NOW}, NOW + dt.timedelta(hours=2)),
        ("2h", {"now": lambda: NOW, "towards": "future"}, NOW + dt.timedelta(hours=2)),
        ("-2h", {"now": lambda: NOW, "towards": "future"}, NOW - dt.timedelta(hours=2)),
        ("+30m", {"now": lambda: NOW, "towards": "either"}, NOW + dt.timedelta(minutes=30)),
        ("-1w", {"now": lambda: NOW, "towards": "either"}, NOW - dt.timedelta(weeks=1)),
        # with a clock the other forms stay as they were
        ("2026-11-20", {"now": lambda: NOW, "end": True},
         dt.datetime(2026, 11, 20, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_forms(text: str, options: dict, expected: dt.datetime) -> None:  # type: ignore[type-arg]
    assert parse_instant(text, option="--from", **options) == expected


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ("0001-01-01T00:00:00+01:00", {}, "must lie between 1900-01-01 and 9000-01-01"),
        ("9999-12-31T23:59:59-01:00", {}, "must lie between 1900-01-01 and 9000-01-01"),
        ("9999-12-31", {"end": True}, "must lie between 1900-01-01 and 9000-01-01"),
        ("1899-12-31", {}, "must lie between 1900-01-01 and 9000-01-01"),
        ("2h", {}, "use an instant such as 2026-03-29T01:30:00Z or a date"),
        ("now", {}, "use an instant such as 2026-03-29T01:30:00Z or a date"),
        ("tomorrow", {"now": lambda: NOW}, "use now, a duration ago such as 2d, an instant"),
        ("tomorrow", {"now": lambda: NOW, "towards": "future"},
         "use now, a duration ahead such as 2h, an instant"),
        ("2h", {"now": lambda: NOW, "towards": "either"},
         "say which way with a sign: -2h (2h ago) or +2h (2h ahead)"),
        ("+-2h", {"now": lambda: NOW}, "use now, a duration ago"),
        ("-0s", {"now": lambda: NOW}, "must be greater than zero"),
        ("+36500d", {"now": lambda: dt.datetime(8950, 1, 1, tzinfo=UTC)},
         "must lie between 1900-01-01 and 9000-01-01"),
        ("999999999w", {"now": lambda: NOW}, "must be between 1s and 36500d"),
        ("36500d", {"now": lambda: dt.datetime(1950, 1, 1, tzinfo=UTC)},
         "must lie between 1900-01-01"),
    ],
)
def test_refused_naming_the_option_and_the_limit(text: str, options: dict,  # type: ignore[type-arg]
                                                  message: str) -> None:
    with pytest.raises(UsageError, match="invalid --from") as info:
        parse_instant(text, option="--from", **options)
    assert message in info.value.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": NaN}', "NaN is not JSON (numbers must be finite)"),
        ('{"a": -Infinity}', "-Infinity is not JSON"),
        ('{"a": 1e999}', "the number 1e999 is out of range (at most about 1.8e308)"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ('{"\\u0000": 1}', "NUL character"),
        ('{"a": [1, {"b": "x\\u0000"}]}', "NUL character"),
    ],
)
def test_payload_refuses_what_jsonb_or_python_cannot_hold(text: str, message: str) -> None:
    with pytest.raises(UsageError, match="invalid --payload") as info:
        parse_payload(text)
    assert message in info.value.message


def test_payload_keeps_an_escaped_backslash() -> None:
    assert parse_payload('{"a": "\\\\u0000", "b": 1e308}') == {"a": "\\u0000", "b": 1e308}
