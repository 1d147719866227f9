"""How `cronjobs forecast` shows its result (text and JSON), and how `define` and `apply`
word a crowded-minute warning."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cronjobs.cli.render.common import instant, table
from cronjobs.core.crowding import Crowding
from cronjobs.core.forecast import Forecast, Peak
from cronjobs.durations import elapsed, format_duration

BAR = 40  # characters of the longest histogram bar
ROWS = 24  # histogram rows at most
_EIGHTHS = " ▏▎▍▌▋▊▉"
NAMED = 5  # jobs named per peak in the text
# the spans a histogram row may cover, shortest first
SPANS = tuple(dt.timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720,
                                                1440, 2880, 10080))
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def crowding_json(warning: Crowding | None) -> dict[str, Any] | None:
    if warning is None:
        return None
    return {
        "message": warning.message,
        "job": warning.job,
        "schedule": warning.schedule,
        "timezone": warning.timezone,
        "at": instant(warning.at),
        "others": warning.others,
        "threshold": warning.threshold,
        "suggestion": warning.suggestion,
        "suggestion_at": instant(warning.suggestion_at),
        "suggestion_others": warning.suggestion_others,
    }


def forecast_json(result: Forecast) -> dict[str, Any]:
    window = result.window
    capacity = result.capacity
    return {
        "from": instant(window.start),
        "to": instant(window.end),
        "now": instant(result.now),
        "bucket_seconds": int(window.bucket.total_seconds()),
        "first_bucket": instant(window.origin),
        "jobs": result.jobs,
        "paused": result.paused,
        "distinct_schedules": result.distinct,
        "one_off_runs": result.one_offs,
        "fires": result.total,
        "unreadable": [{"job": u.name, "problem": u.problem} for u in result.unreadable],
        "capacity": {
            "since": instant(capacity.since),
            "runs_per_second": {kind: round(rate, 3)
                                for kind, rate in capacity.per_second.items()},
            "bursts": capacity.bursts,
            "largest_burst": capacity.largest,
        },
        "crowded_threshold": result.threshold,
        "peaks": [_peak_json(peak) for peak in result.peaks],
        "buckets": list(result.counts),
    }


def _peak_json(peak: Peak) -> dict[str, Any]:
    return {
        "at": instant(peak.start),
        "fires": peak.fires,
        "job_count": peak.job_count,
        "predicted_lateness_seconds": (None if peak.late is None
                                       else round(peak.late.total_seconds(), 3)),
        "jobs": [{"job": job.name, "kind": job.kind, "fires": job.fires,
                  "typical_seconds": (None if job.typical is None
                                      else round(job.typical.total_seconds(), 3))}
                 for job in peak.jobs],
    }


def _when(value: dt.datetime, zone: dt.tzinfo) -> str:
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def forecast_text(result: Forecast, zone: dt.tzinfo) -> str:
    window = result.window
    name = getattr(zone, "key", "UTC")
    lines = [
        f"forecast {_when(window.start, zone)} to {_when(window.end, zone)} ({name}), "
        f"{format_duration(window.bucket)} buckets: {result.total:,} fires of "
        f"{result.jobs:,} job(s) ({result.distinct:,} distinct schedule(s)), "
        f"{result.one_offs:,} one-off run(s); {result.paused:,} job(s) paused throughout",
        _capacity_text(result),
    ]
    for bad in result.unreadable:
        lines.append(f"left out: {bad.name}: {bad.problem}")
    lines.append("")
    if not result.peaks:
        lines.append("no fires in this window")
        return "\n".join(lines)
    lines.append("peaks:")
    rows = []
    for rank, peak in enumerate(result.peaks, 1):
        named = ", ".join(_job_text(job.name, job.fires, job.typical, window.bucket)
                          for job in peak.jobs[:NAMED])
        more = peak.job_count - min(NAMED, len(peak.jobs))
        if more > 0:
            named += f" (+{more:,} more)"
        rows.append((rank, _when(peak.start, zone), f"{peak.fires:,}", f"{peak.job_count:,}",
                     elapsed(peak.late) if result.capacity.known else "-", named))
    lines += ["  " + line for line in table(
        ("#", "at", "fires", "jobs", "last starts late", "who"), rows).splitlines()]
    lines += ["", *histogram(result, zone)]
    return "\n".join(lines)


def _job_text(name: str, fires: int, typical: dt.timedelta | None,
              bucket: dt.timedelta) -> str:
    text = name
    if fires > 1:
        text += f" x{fires}"
    if typical is not None:
        text += f" (~{elapsed(typical)})"
    return text


def _capacity_text(result: Forecast) -> str:
    capacity = result.capacity
    if not capacity.known:
        return (f"capacity: no burst of runs in the history since "
                f"{capacity.since:%Y-%m-%d}: lateness not predicted; a minute is crowded "
                f"above {result.threshold} fires")
    rates = ", ".join(f"{kind} {rate:,.1f} runs/s" for kind, rate
                      in sorted(capacity.per_second.items()))
    return (f"capacity shown since {capacity.since:%Y-%m-%d}: {rates}; a minute is crowded "
            f"above {result.threshold:,} fires")


def histogram(result: Forecast, zone: dt.tzinfo) -> list[str]:
    """The buckets folded into rows of a round span (at most about ROWS of them, aligned on
    the span in UTC), each row a bar as long as its busiest bucket."""
    counts = result.counts
    window = result.window
    bucket = window.bucket
    span = next((s for s in SPANS if s >= bucket and s % bucket == dt.timedelta(0)
                 and (window.end - window.start) / s <= ROWS), bucket * -(-len(counts) // ROWS))
    rows: dict[int, list[int]] = {}
    for index, count in enumerate(counts):
        rows.setdefault((window.bucket_start(index) - _EPOCH) // span, []).append(count)
    top = max(counts) or 1
    lines = [f"busiest {format_duration(bucket)} of each {format_duration(span)} "
             f"(a full bar: {top:,} fires):"]
    for key, row in rows.items():
        busiest = max(row)
        eighths = round(busiest / top * BAR * 8)
        bar = "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")
        at = max(_EPOCH + key * span, window.origin)
        lines.append(f"  {_when(at, zone)}  {bar:<{BAR}} {busiest:,} (total {sum(row):,})")
    return lines
