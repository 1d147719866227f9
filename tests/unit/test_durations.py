import datetime as dt

import pytest

from cronjobs.durations import format_duration, parse_bounded, parse_duration
from cronjobs.errors import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("45", 45),
     (" 2H ", 7200), ("1w", 604800)],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "-5m", "5 minutes", "1.5h", "m", "5x", "0", "0s", "h5",
                                  "99999999999s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="invalid --lease"):
        parse_duration(text, option="--lease")


def test_bounds_are_named() -> None:
    with pytest.raises(UsageError, match="between 10s and 1h"):
        parse_bounded("5s", option="--lease", minimum=dt.timedelta(seconds=10),
                      maximum=dt.timedelta(hours=1))


@pytest.mark.parametrize(("seconds", "text"), [(None, "none"), (0, "0s"), (90, "1m30s"),
                                               (86400 + 3600, "1d1h")])
def test_format_duration(seconds: int | None, text: str) -> None:
    value = None if seconds is None else dt.timedelta(seconds=seconds)
    assert format_duration(value) == text
