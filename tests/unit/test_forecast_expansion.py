"""The forecast's expansion checked against a brute force: every UTC minute of the window,
read on the job's wall clock and matched with croniter (the oracle the schedule tests use),
the DST rules applied by hand; over spring-forward and fall-back days, with pauses that
end, H and the day extensions. And the crowded-minute threshold at its edges."""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from cronjobs import cron as schedules
from cronjobs import errors
from cronjobs.core import crowding as cw
from cronjobs.core import forecast as fc
from cronjobs.core import load as ld
from cronjobs.reports import ForecastGroup, OneOffRun

UTC = dt.UTC
MINUTE = dt.timedelta(minutes=1)

SCHEDULES = ["30 2 * * *", "0,30 2 * * *", "0 2,3 * * *", "*/15 * * * *", "0 * * * *",
             "* 2 * * *", "0 1-3 * * *", "45 1 * * *", "H 2 * * *", "H/20 * * * *",
             "0 2 L * *", "30 2 * * sunL", "0 2 * * sun#1", "@daily", "@hourly", "59 23 * * *"]

# (zone, noon UTC the day before a transition: the window is the next 24 hours)
TRANSITIONS = [
    ("Europe/Berlin", dt.datetime(2026, 3, 28, 12, tzinfo=UTC)),  # spring forward, 29 March
    ("Europe/Berlin", dt.datetime(2026, 10, 24, 12, tzinfo=UTC)),  # fall back, 25 October
    ("America/New_York", dt.datetime(2026, 3, 7, 12, tzinfo=UTC)),  # spring forward, 8 March
    ("America/New_York", dt.datetime(2026, 10, 31, 12, tzinfo=UTC)),  # fall back, 1 November
]


def brute_force(expression: str, zone_name: str, name: str, start: dt.datetime,
                end: dt.datetime, after: dt.datetime | None = None) -> list[dt.datetime]:
    """The job's fires in [start, end), minute by minute: a wildcard job at every instant
    whose wall time matches (both copies of a repeated hour, none in a gap); a fixed-time
    job at the first copy of a matching wall time, and once right after a gap for the
    matching wall times the gap skipped."""
    sched = schedules.parse(expression, zone_name, hash_key=name)
    zone = ZoneInfo(zone_name)

    def match(wall: dt.datetime) -> bool:
        return _croniter_match(sched.canonical, wall, sched.day_or)

    fires = []
    at = start.replace(second=0, microsecond=0)
    if at < start:
        at += MINUTE
    while at < end:
        local = at.astimezone(zone)
        wall = local.replace(tzinfo=None)
        matches = match(wall)
        if sched.is_wildcard:
            fire = matches
        else:
            fire = matches and local.fold == 0
            before = (at - MINUTE).astimezone(zone)
            if not fire and local.utcoffset() > before.utcoffset():  # type: ignore[operator]
                # right after a gap: the skipped wall times between the two clocks
                skipped = before.replace(tzinfo=None) + MINUTE
                while skipped < wall:
                    if match(skipped):
                        fire = True
                        break
                    skipped += MINUTE
        if fire and (after is None or at > after):
            fires.append(at)
        at += MINUTE
    return fires


@functools.cache
def _croniter_match(canonical: str, wall: dt.datetime, day_or: bool) -> bool:
    """croniter.match, each wall time asked once per process (the brute forces over one
    transition ask the same ones)."""
    return bool(croniter.match(canonical, wall, day_or=day_or))


def _job(i: int, expression: str, zone: str, *, paused_at: dt.datetime | None = None,
         paused_until: dt.datetime | None = None, name: str | None = None) -> ForecastGroup:
    return ForecastGroup(expression, zone, "command", paused_at, paused_until,
                         [name or f"job-{i}"], [i])


@pytest.mark.parametrize(("zone", "start"), TRANSITIONS)
def test_every_minute_matches_the_brute_force_over_dst(zone: str, start: dt.datetime) -> None:
    end = start + dt.timedelta(days=1)
    window = ld.make_window(start, end)
    jobs = [_job(i, expression, zone) for i, expression in enumerate(SCHEDULES, 1)]
    load = ld.expand(jobs, [], window)
    expected: Counter[int] = Counter()
    for job in jobs:
        for at in brute_force(job.schedule, zone, job.names[0], start, end):
            expected[window.index(at)] += 1
    counts = load.totals()
    assert {i: n for i, n in enumerate(counts) if n} == dict(expected)
    assert sum(counts) > 0


@pytest.mark.parametrize(("zone", "start"), TRANSITIONS)
def test_a_pause_with_an_end_fires_only_after_it(zone: str, start: dt.datetime) -> None:
    end = start + dt.timedelta(days=1)
    window = ld.make_window(start, end)
    pause_end = start + dt.timedelta(hours=13, minutes=30, seconds=7)  # across the change
    paused = [_job(i, expression, zone, paused_at=start - dt.timedelta(days=1),
                   paused_until=pause_end) for i, expression in enumerate(SCHEDULES, 1)]
    for_good = _job(99, "* * * * *", zone, paused_at=start)  # no end: never fires
    after_window = _job(98, "* * * * *", zone, paused_at=start, paused_until=end)
    load = ld.expand([*paused, for_good, after_window], [], window)
    expected: Counter[int] = Counter()
    for job in paused:
        # (minute by minute from the pause's end: a minute's fire depends on that minute
        # and the one before it alone, so the minutes before it could only be left out)
        for at in brute_force(job.schedule, zone, job.names[0], pause_end, end,
                              after=pause_end):
            expected[window.index(at)] += 1
    counts = load.totals()
    assert {i: n for i, n in enumerate(counts) if n} == dict(expected)
    assert load.paused == 2
    assert load.jobs == len(SCHEDULES)


def test_jobs_sharing_a_schedule_are_expanded_once_and_counted_each() -> None:
    start = dt.datetime(2026, 6, 1, tzinfo=UTC)
    window = ld.make_window(start)
    jobs = [_job(i, "0 3 * * *", "UTC") for i in range(500)]
    jobs += [_job(1000 + i, "0 3 * * *", "Europe/Berlin") for i in range(7)]
    jobs += [_job(2000 + i, "0,30 * * * *", "UTC") for i in range(3)]
    jobs += [_job(3000 + i, "*/30 * * * *", "UTC") for i in range(2)]  # the same fires
    load = ld.expand(jobs, [], window)
    assert len(load.groups) == 4  # */30 and 0,30 are grouped apart (as written), still exact
    counts = load.totals()
    assert counts[window.index(dt.datetime(2026, 6, 1, 3, tzinfo=UTC))] == 505
    assert counts[window.index(dt.datetime(2026, 6, 1, 1, tzinfo=UTC))] == 12  # 03:00 CEST
    assert sum(counts) == 500 + 7 + 5 * 48
    result = fc.summarise(load, start, 2, fc.Capacity(start, {}, {}, {}))
    assert [(p.start.hour, p.fires, p.job_count) for p in result.peaks] == [(3, 505, 505),
                                                                           (1, 12, 12)]
    assert len(result.peaks[0].jobs) == ld.PEAK_JOBS
    assert result.peaks[0].late is None


def test_one_off_runs_fire_at_their_time_in_their_bucket() -> None:
    start = dt.datetime(2026, 6, 1, tzinfo=UTC)
    window = ld.make_window(start, bucket=dt.timedelta(hours=1))
    one_offs = [OneOffRun(7, "report", "handler", start + dt.timedelta(hours=5, seconds=17)),
                OneOffRun(7, "report", "handler", start - dt.timedelta(seconds=1)),
                OneOffRun(7, "report", "handler", window.end)]
    load = ld.expand([_job(1, "*/10 * * * *", "UTC")], one_offs, window)
    counts = load.totals()
    assert counts[5] == 7 and sum(counts) == 24 * 6 + 1
    named, total = load.jobs_in(5)
    assert total == 2
    assert [(m.name, fires) for m, fires in named] == [("job-1", 6), ("report", 1)]


def test_buckets_align_on_the_epoch_and_the_window_is_bounded() -> None:
    start = dt.datetime(2026, 6, 1, 10, 17, 30, tzinfo=UTC)
    window = ld.make_window(start, bucket=dt.timedelta(hours=1))
    assert window.origin == dt.datetime(2026, 6, 1, 10, tzinfo=UTC)
    assert window.buckets == 25
    for end, bucket, message in [
            (start, MINUTE, "after --from"),
            (start + dt.timedelta(days=32), MINUTE, "at most 31d"),
            (start + dt.timedelta(hours=1), dt.timedelta(seconds=90), "whole minutes"),
            (start + dt.timedelta(hours=1), dt.timedelta(hours=2), "longer than the window")]:
        with pytest.raises(errors.UsageError, match=message):
            ld.make_window(start, end, bucket)


def test_the_predicted_lateness_drains_the_fires_in_order() -> None:
    start = dt.datetime(2026, 6, 1, tzinfo=UTC)
    window = ld.make_window(start, start + dt.timedelta(hours=1))
    jobs = [_job(i, "5 * * * *", "UTC") for i in range(101)]
    jobs += [_job(200 + i, "6 * * * *", "UTC") for i in range(10)]
    load = ld.expand(jobs, [], window)
    late = fc.predicted_lateness(load, {"command": 10.0})
    # 101 runs at 10/s: the last starts 10 s late; the next minute's 10 find no backlog
    assert late[5] == dt.timedelta(seconds=10)
    assert late[6] == dt.timedelta(seconds=0.9)
    slow = fc.predicted_lateness(load, {"command": 1.0})
    assert slow[6] == dt.timedelta(seconds=100 + 1 - 60 + 9)  # the backlog carries over
    assert fc.predicted_lateness(load, {"handler": 1.0}) == {5: None, 6: None}


# -- the crowded-minute warning ----------------------------------------------------------

def _crowded_load(others: int) -> tuple[ld.Load, list[int]]:
    start = dt.datetime(2026, 6, 1, tzinfo=UTC)
    window = ld.make_window(start, start + cw.CHECK_WINDOW)
    load = ld.expand([_job(i, "0 3 * * *", "UTC") for i in range(others)], [], window)
    return load, load.totals()


@pytest.mark.parametrize("threshold", [0, 1, 10, 14])
def test_the_threshold_at_its_edges(threshold: int) -> None:
    # exactly `threshold` fires of other jobs: no warning; one more: a warning
    load, counts = _crowded_load(threshold)
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", threshold) is None
    load, counts = _crowded_load(threshold + 1)
    warning = cw.crowding(load, counts, "new", "0 3 * * *", "UTC", threshold)
    assert warning is not None
    assert (warning.others, warning.threshold) == (threshold + 1, threshold)
    assert warning.at == dt.datetime(2026, 6, 1, 3, tzinfo=UTC)
    assert warning.suggestion == "H 3 * * *"
    hashed = schedules.parse("H 3 * * *", "UTC", hash_key="new")
    assert warning.suggestion_at == hashed.next_after(dt.datetime(2026, 6, 1, tzinfo=UTC))
    minute = warning.suggestion_at.minute if warning.suggestion_at else -1
    assert warning.suggestion_others == (threshold + 1 if minute == 0 else 0)
    assert warning.message == (
        f"0 3 * * * shares 03:00 (UTC, first on 2026-06-01) with {threshold + 1} other job "
        f"run(s), more than the crowded-minute threshold of {threshold}; `H 3 * * *` would "
        f"run at 03:{minute:02d}, which holds {warning.suggestion_others}")


def test_a_job_counted_in_the_load_is_not_its_own_crowd() -> None:
    load, _ = _crowded_load(3)
    load.add(["new"], "0 3 * * *", "UTC")
    counts = load.totals()
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", 3, counted=True) is None
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", 2, counted=True) is not None
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", cw.OFF) is None


def test_a_pause_that_ends_after_the_crowd_is_not_crowded() -> None:
    load, counts = _crowded_load(5)
    end = dt.datetime(2026, 6, 7, 4, tzinfo=UTC)  # after the last 03:00 of the window
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", 4, after=end) is None
    assert cw.crowding(load, counts, "new", "0 3 * * *", "UTC", 4,
                       after=end - dt.timedelta(days=1)) is not None


@pytest.mark.parametrize(("expression", "alternative"), [
    ("0 3 * * *", "H 3 * * *"), ("15 */2 * * 1-5", "H */2 * * 1-5"),
    ("*/15 * * * *", "H/15 * * * *"), ("0/10 * * * *", "H/10 * * * *"),
    ("0-59/20 9 * * *", "H/20 9 * * *"), ("@daily", "H 0 * * *"), ("@hourly", "H * * * *"),
    ("  0   3 * * *", "H 3 * * *"),
    ("* 3 * * *", None), ("0,30 * * * *", None), ("H 3 * * *", None), ("5-10 * * * *", None),
])
def test_what_h_in_the_minute_field_gives(expression: str, alternative: str | None) -> None:
    assert cw.hashed_alternative(expression) == alternative


@pytest.mark.parametrize(("text", "value"), [("auto", None), ("AUTO", None), ("off", cw.OFF),
                                             ("0", 0), ("25", 25)])
def test_the_threshold_option(text: str, value: int | None) -> None:
    assert cw.parse_threshold(text) == value


@pytest.mark.parametrize("text", ["-1", "many", "", "1e3", "\uff11"])
def test_a_bad_threshold_is_refused(text: str) -> None:
    with pytest.raises(errors.UsageError, match="invalid --crowded-threshold"):
        cw.parse_threshold(text)


def test_the_default_threshold_comes_from_the_slowest_mode_shown() -> None:
    now = dt.datetime(2026, 6, 1, tzinfo=UTC)
    assert fc.Capacity(now, {}, {}, {}).threshold() == fc.DEFAULT_CROWDED
    assert fc.Capacity(now, {"command": 2.55, "handler": 300.0}, {}, {}).threshold() == 25
    assert fc.Capacity(now, {"command": 0.01}, {}, {}).threshold() == 1


def test_a_stored_group_of_jobs_counts_each_and_h_stays_each_jobs_own() -> None:
    start = dt.datetime(2026, 6, 1, tzinfo=UTC)
    window = ld.make_window(start)
    rows = [ForecastGroup("0 3 * * *", "UTC", "command", None, None,
                          [f"n-{i}" for i in range(50)], list(range(50))),
            ForecastGroup("H 4 * * *", "UTC", "handler", None, None, ["h-a", "h-b"], [91, 92])]
    load = ld.expand(rows, [], window, leave_out=["n-7", "h-b"])
    counts = load.totals()
    assert counts[window.index(dt.datetime(2026, 6, 1, 3, tzinfo=UTC))] == 49
    hashed = schedules.parse("H 4 * * *", "UTC", hash_key="h-a").next_after(start)
    assert counts[window.index(hashed)] == 1 and sum(counts) == 50
    assert load.jobs == 50
    named, total = load.jobs_in(window.index(dt.datetime(2026, 6, 1, 3, tzinfo=UTC)), limit=3)
    assert total == 49 and [m.name for m, _ in named] == ["n-0", "n-1", "n-2"]
    assert load.own_buckets("h-a") == Counter([window.index(hashed)])


def test_h_jobs_read_together_are_each_their_own_and_grouped_by_what_they_fire_on() -> None:
    # forecast_jobs hands H jobs over in one row per schedule and zone; each job's H comes
    # from its name, and jobs whose H fields come out alike share one expansion.
    start = dt.datetime(2026, 3, 28, 12, tzinfo=UTC)  # Berlin's spring-forward night
    window = ld.make_window(start)
    expressions = ["H 3 * * *", "H H * * *", "H/15 * * * *", "H(0-29) 2 * * *", "0 0 H * *",
                   "H 4 * * 1-5"]
    zones = ["UTC", "Europe/Berlin", "America/New_York"]
    names = [f"job-{i}" for i in range(300)]
    rows = [ForecastGroup(expression, zone, "command", None, None, names,
                          list(range(len(names))))
            for expression in expressions for zone in zones]
    load = ld.expand(rows, [], window)
    expected: Counter[int] = Counter()
    shapes = set()
    for expression in expressions:
        for zone in zones:
            for name in names:
                sched = schedules.parse(expression, zone, hash_key=name)
                shapes.add((sched.canonical, sched.is_wildcard, zone))
                for at in ld.fires_of(sched, window):
                    expected[window.index(at)] += 1
    counts = load.totals()
    assert {i: n for i, n in enumerate(counts) if n} == dict(expected)
    assert load.jobs == len(expressions) * len(zones) * len(names)
    assert len(load.groups) == len(shapes) < load.jobs
    one_by_one = ld.expand([ForecastGroup(row.schedule, row.timezone, "command", None, None,
                                          [name], [i]) for row in rows
                            for i, name in enumerate(row.names)], [], window)
    assert one_by_one.totals() == counts
