import datetime as dt
import pathlib
import re

import pytest

from cronjobs.durations import age, elapsed, format_duration, parse_bounded, parse_duration, precise
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
                                               (86400 + 3600, "1d1h"), (0.5, "0.5s"),
                                               (12.25, "12.25s"), (3723.9, "1h2m3s")])
def test_format_duration(seconds: float | None, text: str) -> None:
    value = None if seconds is None else dt.timedelta(seconds=seconds)
    assert format_duration(value) == text
    # a number of seconds reads the same
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "-"), (0, "0ms"), (0.2504, "250ms"), (1, "1s"), (12.25, "12.2s"), (59.94, "59.9s"),
    (65.4, "1m5s"), (3600, "1h"), (90061, "1d1h1m1s")])
def test_elapsed(seconds: float | None, text: str) -> None:
    value = None if seconds is None else dt.timedelta(seconds=seconds)
    assert elapsed(value) == text
    assert elapsed(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.25, "0.25s"), (12.5, "12.5s"), (1.0004, "1s"), (185, "3m05s"),
    (7800, "2h10m")])
def test_precise(seconds: float, text: str) -> None:
    assert precise(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (1, "1s"), (119, "119s"), (120, "2m"), (3600, "60m"), (7200, "2h00m"),
    (26 * 3600, "26h00m"), (172800, "2d")])
def test_age(seconds: int, text: str) -> None:
    assert age(dt.timedelta(seconds=seconds)) == text


def test_every_duration_is_written_by_this_module() -> None:
    # no other module formats a duration with its own f-string (seconds with a unit)
    root = pathlib.Path(__file__).parents[2] / "cronjobs"
    pattern = re.compile(r"\{[^{}]*:[.0-9]*[fg]\}\s?m?s\b")
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
             if path.name != "durations.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert found == []
