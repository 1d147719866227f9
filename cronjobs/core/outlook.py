"""What the dashboard shows of the forecast: the next day or week of the fleet's fires, a
heatmap of them, and a job's place among them with its crowded-minute warning."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cronjobs.core.crowding import Crowding, crowding
from cronjobs.core.forecast import DEFAULT_TOP, Forecast, Place, capacity, place_of, summarise
from cronjobs.core.load import DEFAULT_WINDOW, EPOCH, MIN_BUCKET, Load, expand, make_window
from cronjobs.db.store import Store
from cronjobs.errors import ScheduleError, UsageError

VIEWS = ("day", "week")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True)
class Heatmap:
    """Fires laid out for the eye: hour of day by minute (``day``: the next 24 hours in
    1-minute buckets) or day of week by hour (``week``: the next 7 days in 1-hour buckets),
    on UTC's clock. ``cells[row][column]``; ``top`` the largest."""

    view: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[int, ...], ...]
    top: int


@dataclass(frozen=True)
class Outlook:
    """What the dashboard shows of the forecast: the forecast of the view's window, its
    load (to place a job in it) and its heatmap."""

    forecast: Forecast
    load: Load
    heatmap: Heatmap


def outlook(store: Store, view: str = "day", *, top: int = DEFAULT_TOP) -> Outlook:
    """The next day (``day``, from the current minute) or week (``week``, from the current
    hour) of the fleet's fires, for the dashboard."""
    if view not in VIEWS:
        raise UsageError(f"invalid view {view!r}: use day or week")
    now = store.now()
    bucket = MIN_BUCKET if view == "day" else dt.timedelta(hours=1)
    start = now - (now - EPOCH) % bucket
    window = make_window(start, start + (DEFAULT_WINDOW if view == "day"
                                         else dt.timedelta(days=7)), bucket)
    load = expand(store.forecast.forecast_jobs(),
                  store.forecast.one_off_runs(start=window.start, end=window.end), window)
    result = summarise(load, now, top, capacity(store, now), store)
    return Outlook(result, load, _heatmap(result, view))


def _heatmap(result: Forecast, view: str) -> Heatmap:
    day = view == "day"
    rows = tuple(f"{h:02d}" for h in range(24)) if day else _WEEKDAYS
    columns = tuple(f"{m:02d}" for m in range(60)) if day else tuple(
        f"{h:02d}" for h in range(24))
    cells = [[0] * len(columns) for _ in rows]
    for index, count in enumerate(result.counts):
        at = result.window.bucket_start(index)
        row, column = (at.hour, at.minute) if day else (at.weekday(), at.hour)
        cells[row][column] += count
    return Heatmap(view, rows, columns, tuple(map(tuple, cells)),
                   max(result.counts, default=0))


def job_outlook(view: Outlook, name: str, expression: str, timezone: str,
                after: dt.datetime | None = None) -> tuple[Place, Crowding | None]:
    """A job's place in the dashboard's forecast, and whether its schedule is crowded (by
    the threshold of the capacity shown; ``after``: its pause's end) in 1-minute views."""
    place = place_of(view.forecast, view.load, name)
    warning = None
    if view.load.window.bucket == MIN_BUCKET and place.fires:
        try:
            warning = crowding(view.load, view.forecast.counts, name, expression, timezone,
                               view.forecast.threshold, counted=True, after=after)
        except ScheduleError:
            warning = None
    return place, warning
