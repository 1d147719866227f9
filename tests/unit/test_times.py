"""Times for people: one format for the command line and the dashboard (cronjobs.timefmt),
in the local zone or UTC, relative to the operation's instant, which is a parameter, so
these are pinned whatever the machine's zone."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest

from cronjobs.cli.render.runs import runs_list_text
from cronjobs.core.facts import run_info
from cronjobs.models import Run
from cronjobs.timefmt import Times, in_zone, in_zone_named, iso, relative
from cronjobs.web.render import _local, _utc

NOW = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(("delta", "text"), [
    (dt.timedelta(0), "now"),
    (dt.timedelta(milliseconds=-400), "now"),
    (dt.timedelta(seconds=-1), "1 s ago"),
    (dt.timedelta(seconds=-59), "59 s ago"),
    (dt.timedelta(seconds=-60), "1 min ago"),
    (dt.timedelta(minutes=-3, seconds=-59), "3 min ago"),
    (dt.timedelta(hours=-2, minutes=-59), "2 h ago"),
    (dt.timedelta(days=-3, hours=-23), "3 d ago"),
    (dt.timedelta(seconds=5), "in 5 s"),
    (dt.timedelta(minutes=90), "in 1 h"),
    (dt.timedelta(days=400), "in 400 d"),
])
def test_relative(delta: dt.timedelta, text: str) -> None:
    assert relative(NOW + delta, NOW) == text


def test_local_zone_across_a_dst_change() -> None:
    berlin = Times(NOW, zone=ZoneInfo("Europe/Berlin"))
    # 00:30 UTC is 01:30 CET; two hours later the clocks have gone forward (CEST)
    assert berlin.when(NOW) == "2026-03-29 01:30 CET (now)"
    assert berlin.when(NOW + dt.timedelta(hours=2)) == "2026-03-29 04:30 CEST (in 2 h)"
    assert berlin.at(NOW + dt.timedelta(hours=2)) == "2026-03-29 04:30 CEST"
    assert berlin.label == "CET"
    assert berlin.when(None) == "-"


def test_utc() -> None:
    assert Times(NOW, utc=True, zone=ZoneInfo("Asia/Tokyo")).when(
        NOW - dt.timedelta(minutes=3)) == "2026-03-29 00:27 UTC (3 min ago)"
    assert Times(NOW, utc=True).label == "UTC"
    # a local zone that is UTC reads the same as --utc
    assert Times(NOW, zone=ZoneInfo("UTC")).when(NOW) == "2026-03-29 00:30 UTC (now)"
    assert Times(NOW, zone=ZoneInfo("Etc/GMT")).at(NOW) == "2026-03-29 00:30 UTC"


def test_without_now_times_are_absolute() -> None:
    assert Times(utc=True).when(NOW) == "2026-03-29 00:30 UTC"
    assert Times(utc=True).ago(NOW) == "2026-03-29 00:30 UTC"
    assert Times(utc=True).label == "UTC"


def test_a_zone_without_abbreviation_shows_its_offset() -> None:
    assert in_zone(NOW, ZoneInfo("Asia/Dubai")) == "2026-03-29 04:30 +0400"
    assert in_zone_named(NOW, "America/Sao_Paulo") == "2026-03-28 21:30 -0300"


def test_the_local_zone_is_read_from_tz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert Times.of(utc=False, now=NOW).when(NOW) == "2026-03-29 01:30 CET (now)"
    assert Times.of(utc=True, now=NOW).when(NOW) == "2026-03-29 00:30 UTC (now)"
    monkeypatch.setenv("TZ", "America/New_York")
    assert Times.of(utc=False).at(NOW) == "2026-03-28 20:30 EDT"


def test_spans() -> None:
    times = Times(utc=True)
    later = NOW + dt.timedelta(hours=1, minutes=38)
    assert times.span(NOW, later) == "2026-03-29 00:30\u201302:08 UTC"
    assert times.span(NOW, NOW) == "2026-03-29 00:30 UTC"
    assert times.span(NOW, NOW + dt.timedelta(days=1)) == (
        "2026-03-29 00:30 UTC \u2013 2026-03-30 00:30 UTC")
    # a span across a change of zone abbreviation names both ends in full
    berlin = Times(zone=ZoneInfo("Europe/Berlin"))
    assert berlin.span(NOW, NOW + dt.timedelta(hours=2)) == (
        "2026-03-29 01:30 CET \u2013 2026-03-29 04:30 CEST")


def test_json_is_iso_8601_in_utc() -> None:
    assert iso(NOW.astimezone(ZoneInfo("Europe/Berlin"))) == "2026-03-29T00:30:00+00:00"
    assert iso(None) is None


def test_the_dashboard_uses_the_same_format() -> None:
    assert _utc(NOW) == "2026-03-29 00:30 UTC" == Times(utc=True).at(NOW)
    assert _local(NOW, "Europe/Berlin") == "2026-03-29 01:30 CET"
    assert _utc(None) == "-"


def _run(finished: dt.datetime | None) -> Run:
    return Run(id=7, definition_id=1, scheduled_for=dt.datetime(2026, 3, 29, tzinfo=dt.UTC),
               trigger="schedule", status="succeeded" if finished else "queued", payload=None,
               attempt=1, max_attempts=3, exclusive=True, eligible_at=NOW, lease_owner=None,
               lease_token=None, lease_expires_at=None, heartbeat_at=None,
               cancel_requested_at=None, started_at=None, finished_at=finished, exit_code=None,
               error=None, output_tail=None, result=None, retry_count=0, retried_at=None,
               retry_of=None, tick_id=None, created_at=NOW, updated_at=NOW,
               acknowledged_at=None, acknowledged_by=None, output_bytes=None,
               stage="history" if finished else "queue", retire_at=None)


def test_a_runs_table_pinned_in_time_and_zone() -> None:
    text = runs_list_text([run_info(_run(NOW - dt.timedelta(seconds=30)), "nightly", ())],
                          Times(NOW, zone=ZoneInfo("America/New_York")))
    assert [re.split(r"\s{2,}", line) for line in text.splitlines()] == [
        ["ID", "JOB", "SLOT (EDT)", "TRIGGER", "STATUS", "ATTEMPTS", "FINISHED", "ERROR"],
        ["7", "nightly", "2026-03-28 20:00 EDT (30 min ago)", "schedule", "succeeded",
         "1/3", "2026-03-28 20:29 EDT (30 s ago)"],
    ]
    # --utc
    assert "SLOT (UTC)" in runs_list_text([run_info(_run(None), "nightly", ())],
                                          Times(NOW, utc=True))
