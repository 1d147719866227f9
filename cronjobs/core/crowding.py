"""The warning given while a schedule is written into a crowded minute (``define``,
``apply``, a job's page): the minute it lands in already holds more fires of other jobs
than the threshold (from the capacity shown: ``core.forecast``), and what ``H`` would give
instead."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cronjobs import cron as schedules
from cronjobs.core.forecast import Capacity, capacity
from cronjobs.core.load import MIN_BUCKET, Load, expand, fires_of, make_window
from cronjobs.cron.expressions import MACROS
from cronjobs.db.store import Store
from cronjobs.durations import shown
from cronjobs.errors import ScheduleError, UsageError
from cronjobs.models import DefinitionSpec

CHECK_WINDOW = dt.timedelta(days=7)  # the window a new schedule is checked over

OFF = -1  # the threshold that checks nothing


def parse_threshold(text: str) -> int | None:
    """``--crowded-threshold``: a number of fires (0 or more), ``auto`` (None: from the
    capacity shown, else DEFAULT_CROWDED of core.forecast) or ``off`` (OFF)."""
    value = text.strip().lower()
    if value == "auto":
        return None
    if value == "off":
        return OFF
    if value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    raise UsageError(f"invalid --crowded-threshold {shown(text)}: use a number of runs (0 or "
                     "more), auto or off")


@dataclass(frozen=True)
class Crowding:
    """A schedule that lands in a minute already holding more than ``threshold`` fires of
    other jobs, and what ``H`` would give instead. A warning, never an error."""

    job: str
    schedule: str
    timezone: str
    at: dt.datetime  # the most crowded minute it lands in (the first of them)
    others: int  # fires of other jobs in that minute
    threshold: int
    suggestion: str | None  # the schedule with H in the minute field, if that fits
    suggestion_at: dt.datetime | None  # its first fire in the window
    suggestion_others: int | None  # fires of other jobs in its most crowded minute

    @property
    def message(self) -> str:
        zone = schedules.check_timezone(self.timezone)
        local = self.at.astimezone(zone)
        text = (f"{self.schedule} shares {local:%H:%M} ({self.timezone}, first on "
                f"{local:%Y-%m-%d}) with {self.others} other job run(s), more than the "
                f"crowded-minute threshold of {self.threshold}")
        if self.suggestion is not None and self.suggestion_at is not None:
            alt = self.suggestion_at.astimezone(zone)
            text += (f"; `{self.suggestion}` would run at {alt:%H:%M}, which holds "
                     f"{self.suggestion_others}")
        return text


def hashed_alternative(expression: str) -> str | None:
    """The expression with ``H`` in its minute field, when that field is one plain value
    (``0 3 * * *``: ``H 3 * * *``) or a step from the hour's start (``*/15``: ``H/15``);
    None otherwise."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        text = MACROS.get(text.lower(), "")
    fields = text.split(" ")
    if len(fields) != 5:
        return None
    minute = fields[0]
    if minute.isascii() and minute.isdigit():
        fields[0] = "H"
    elif (step := re.fullmatch(r"(?:\*|0|0-59)/(\d+)", minute, re.ASCII)) is not None:
        fields[0] = f"H/{step.group(1)}"
    else:
        return None
    return " ".join(fields)


def crowding(load: Load, counts: Sequence[int], name: str, expression: str, timezone: str,
             threshold: int, *, counted: bool = False, after: dt.datetime | None = None
             ) -> Crowding | None:
    """Whether the job's fires land in a minute of ``load`` (1-minute buckets; ``counts``:
    its totals) holding more than ``threshold`` fires of other jobs. ``counted``: the job
    is in the load already (its own fires are taken off). ``after``: its pause's end."""
    if threshold < 0:
        return None
    sched = schedules.parse(expression, timezone, hash_key=name)
    window = load.window
    own = [window.index(at) for at in fires_of(sched, window) if after is None or at > after]
    if not own:
        return None
    own_count = Counter(own) if counted else Counter[int]()

    def others(index: int) -> int:
        return counts[index] - own_count[index]

    worst = max(own, key=lambda i: (others(i), -i))
    if others(worst) <= threshold:
        return None
    suggestion = hashed_alternative(expression)
    suggestion_at = suggestion_others = None
    if suggestion is not None:
        try:
            alt = schedules.parse(suggestion, timezone, hash_key=name)
        except ScheduleError:
            suggestion = None
        else:
            alt_fires = [at for at in fires_of(alt, window) if after is None or at > after]
            if alt_fires:
                suggestion_at = alt_fires[0]
                suggestion_others = max(others(window.index(at)) for at in alt_fires)
            else:
                suggestion = None
    return Crowding(name, expression, timezone, window.bucket_start(worst), others(worst),
                    threshold, suggestion, suggestion_at, suggestion_others)


def check_load(store: Store, *, leave_out: Iterable[str] = ()) -> tuple[Load, Capacity]:
    """The load of the stored jobs (less ``leave_out``) over the next CHECK_WINDOW in
    minutes, and the capacity shown: what a new schedule is checked against."""
    now = store.now()
    window = make_window(now, now + CHECK_WINDOW, MIN_BUCKET)
    load = expand(store.forecast.forecast_jobs(),
                  store.forecast.one_off_runs(start=window.start, end=window.end), window,
                  leave_out=leave_out)
    return load, capacity(store, now)


def check_define(store: Store, spec: DefinitionSpec, threshold: int | None,
                 after: dt.datetime | None = None) -> Crowding | None:
    """The warning for ``define``: ``spec`` against every other stored job. ``threshold``
    None: the default (from the capacity shown); OFF: no check."""
    if threshold == OFF:
        return None
    load, shown_capacity = check_load(store, leave_out=(spec.name,))
    limit = shown_capacity.threshold() if threshold is None else threshold
    return crowding(load, load.totals(), spec.name, spec.schedule, spec.timezone, limit,
                    after=after)


def check_apply(store: Store, specs: Sequence[DefinitionSpec], threshold: int | None, *,
                paused: dict[str, tuple[dt.datetime | None, dt.datetime | None]],
                removed: Iterable[str] = ()) -> dict[str, Crowding]:
    """The warnings for ``apply``: each declared job against the fleet as it will be (the
    stored jobs less the declared and the removed ones, plus the declared ones). ``paused``:
    the declared jobs' current pause (paused_at, paused_until), which apply keeps."""
    if threshold == OFF or not specs:
        return {}
    declared = [spec.name for spec in specs]
    load, shown_capacity = check_load(store, leave_out=[*declared, *removed])
    limit = shown_capacity.threshold() if threshold is None else threshold
    ends: dict[str, dt.datetime | None] = {}
    for spec in specs:
        paused_at, paused_until = paused.get(spec.name, (None, None))
        if paused_at is not None and paused_until is None:
            continue  # paused for good: fires nothing
        ends[spec.name] = paused_until
        load.add([spec.name], spec.schedule, spec.timezone, kind=spec.kind.value,
                 after=paused_until)
    found = {}
    counts = load.totals()
    for spec in specs:
        if spec.name in ends:
            warning = crowding(load, counts, spec.name, spec.schedule, spec.timezone, limit,
                               counted=True, after=ends[spec.name])
            if warning is not None:
                found[spec.name] = warning
    return found


