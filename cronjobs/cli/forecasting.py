"""The command that forecasts the fleet's load: forecast. It parses its input, calls one
library function and renders the result."""

from __future__ import annotations

import click

from cronjobs.cli.app import App, emit, json_option, pass_app, time_help
from cronjobs.cli.options import Command
from cronjobs.cli.render_forecast import forecast_json, forecast_text
from cronjobs.core import forecast as forecasting
from cronjobs.core.load import MAX_WINDOW, MIN_BUCKET, parse_bucket
from cronjobs.cron import check_timezone
from cronjobs.durations import looks_like_duration, parse_bounded
from cronjobs.instants import FORMS, parse_instant


@click.command(cls=Command)
@click.option("--from", "start", metavar="TIME",
              help=time_help("Start of the window (default: now)"))
@click.option("--to", "end", metavar="TIME|DURATION",
              help="End of the window: a duration without a sign is the window's length "
                   "after --from (default: 1d; at most 31d); else an instant (exclusive) or "
                   "a date (that whole day included): " + FORMS["future"] + ".")
@click.option("--bucket", default="1m", show_default=True, metavar="DURATION",
              help="The width of each bucket the fires are counted in (whole minutes).")
@click.option("--top", type=click.IntRange(1, forecasting.MAX_TOP), default=10,
              show_default=True, help="How many peaks to show.")
@click.option("--tz", default="UTC", show_default=True, metavar="ZONE",
              help="The zone times are shown in, and times without an offset are read in.")
@json_option
@pass_app
def forecast(app: App, start: str | None, end: str | None, bucket: str, top: int, tz: str,
             as_json: bool) -> None:
    """Forecast the load: every active job's fires over a window (time zones, DST, pauses
    with their end, H, one-off runs), per bucket, with the peaks and the jobs that make
    them and a histogram. Where the history shows how fast runs start, each peak gets the
    predicted lateness of its last run.

    \b
    Examples:
      cronjobs forecast                      # the next 24 hours, minute by minute
      cronjobs forecast --to 7d --bucket 1h --top 5
      cronjobs forecast --from 2026-03-29 --to 2026-03-29 --tz Europe/Berlin
      cronjobs forecast --json
    """
    zone = check_timezone(tz)
    width = parse_bucket(bucket)
    store = app.store()
    begin = (parse_instant(start, option="--from", zone=zone, now=store.now)
             if start is not None else None)
    finish = length = None
    if end is not None and looks_like_duration(end):
        length = parse_bounded(end, option="--to", minimum=MIN_BUCKET,
                               maximum=MAX_WINDOW)
    elif end is not None:
        finish = parse_instant(end, option="--to", now=store.now, towards="future",
                               zone=zone, end=True)
    result = forecasting.forecast(store, start=begin, end=finish, length=length, bucket=width,
                                  top=top)
    emit(forecast_json(result), forecast_text(result, zone), as_json)
