"""Times for people: in the local zone (or UTC) and relative to the operation's instant,
which is a parameter, so these tables are pinned."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest

from cronjobs.cli.render import runs_list_text
from cronjobs.cli.render_live import Times, relative
from cronjobs.core.facts import run_info
from cronjobs.models import Run

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
    assert berlin.when(NOW) == "2026-03-29 01:30:00 CET (now)"
    assert berlin.when(NOW + dt.timedelta(hours=2)) == "2026-03-29 04:30:00 CEST (in 2 h)"
    assert berlin.label == "CET"
    assert berlin.when(None) == "-"


def test_utc() -> None:
    assert Times(NOW, utc=True, zone=ZoneInfo("Asia/Tokyo")).when(
        NOW - dt.timedelta(minutes=3)) == "2026-03-29 00:27:00Z (3 min ago)"
    assert Times(NOW, utc=True).label == "UTC"
    # a local zone that is UTC reads the same as --utc
    assert Times(NOW, zone=ZoneInfo("UTC")).when(NOW) == "2026-03-29 00:30:00Z (now)"


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
        ["7", "nightly", "2026-03-28 20:00:00 EDT (30 min ago)", "schedule", "succeeded",
         "1/3", "2026-03-28 20:29:30 EDT (30 s ago)"],
    ]
    # without Times: UTC, absolute, as before
    assert "SLOT (UTC)" in runs_list_text([run_info(_run(None), "nightly", ())])
