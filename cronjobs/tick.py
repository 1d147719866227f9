"""One tick: materialise due slots, then reclaim, claim, run and finish, then exit.

The tick reads one instant from the database (or takes ``--now``) and passes it to every
step, as a :class:`~cronjobs.clock.Clock` that also counts the time elapsed since (for
leases, backoff and outcomes while runs take their time); nothing below reads a clock of
its own. An instant more than :data:`FUTURE_SKEW` ahead of the database's clock is refused
unless the caller allows the future (``--allow-future``): such a tick would consume future
slots for real.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from cronjobs.clock import Clock
from cronjobs.core.materialise import MaterialiseReport, materialise
from cronjobs.core.retention import Upkeep, tick_upkeep
from cronjobs.db.store import Store
from cronjobs.durations import format_duration
from cronjobs.errors import UsageError
from cronjobs.execution.alerts import Alerts
from cronjobs.execution.executor import Executor
from cronjobs.execution.observe import RunObserver
from cronjobs.execution.options import TickOptions
from cronjobs.execution.outbox import TickOutbox
from cronjobs.execution.registry import load_apps
from cronjobs.execution.state import ExecReport
from cronjobs.models import LostTick, TickStatus, WaitingRuns

__all__ = ["FUTURE_SKEW", "TICK_LOST_AFTER", "TickOptions", "TickReport", "tick"]

log = logging.getLogger(__name__)

# How far ahead of the database clock --now may be without --allow-future: the clocks of
# the host that typed it and of the database may differ a little, never by more.
FUTURE_SKEW = dt.timedelta(minutes=1)

# A tick still 'running' this long after its instant, holding no live lease, went away
# before recording its end (killed, or its database unreachable at the end): the next tick
# closes it as lost. A live tick renews the leases of what it runs, and one that runs
# nothing ends within its --max-runtime (45 s by default) plus its materialisation.
TICK_LOST_AFTER = dt.timedelta(hours=1)


class TickReport:
    """What one tick did, filled in as it goes."""

    def __init__(self, tick_id: int | None, now: dt.datetime, dry_run: bool) -> None:
        self.tick_id = tick_id
        self.now = now
        self.dry_run = dry_run
        self.materialise = MaterialiseReport()
        self.execute = ExecReport()
        self.upkeep = Upkeep()
        self.handlers: tuple[str, ...] = ()  # the handlers the tick could run
        self.waiting: list[WaitingRuns] = []  # due runs of the handlers it could not
        self.lost_ticks: list[LostTick] = []  # earlier ticks it closed as lost
        self.redelivered = 0  # notifications of the outbox it tried again

    def counts(self) -> dict[str, int]:
        e = self.execute
        return {
            "materialised": self.materialise.materialised,
            "skipped": self.materialise.skipped_slots,
            "reclaimed": e.reclaimed,
            "claimed": e.claimed,
            "succeeded": e.succeeded,
            "failed": e.failed,
        }


def tick(store: Store, options: TickOptions, *,
         should_stop: Callable[[], bool] = lambda: False) -> TickReport:
    """Run one tick and return what it did. Failing jobs are data in the report, not
    exceptions; only a tick that could not do its work raises. ``store`` reconnects
    itself after a lost connection (when it was opened with a way to connect)."""
    if options.dry_run:
        now = options.now if options.now is not None else store.now()
        report = TickReport(None, now, True)
        report.materialise = materialise(store, now, dry_run=True)
        return report
    if options.now is not None and not options.allow_future:
        _refuse_the_future(store, options.now)
    handlers = _handlers(options.apps)  # before anything is written: a broken app stops here
    tick_id, now, lost = store.ticks.insert_tick(worker=options.worker, now=options.now,
                                                 lost_after=TICK_LOST_AFTER, handlers=handlers)
    clock = Clock(now)
    report = TickReport(tick_id, now, False)
    report.handlers = handlers
    report.lost_ticks = lost
    _log_lost_ticks(lost)
    executor: Executor | None = None
    # live output, tracing (the tick's span starts here); the notifications' outbox
    observer = RunObserver.for_tick(store, tick_id=tick_id, worker=options.worker)
    outbox = TickOutbox(store, clock.now, dashboard_url=options.dashboard_url,
                        notify_deadline=options.notify_deadline)
    try:
        if options.run_ids is None:
            report.materialise = materialise(store, now, tick_id=tick_id)
            # the outbox: notifications no receiver took yet, sent while the runs run
            report.redelivered = outbox.redeliver()
        executor = Executor(store, options, clock=clock, tick_id=tick_id, due_at=now,
                            handlers=handlers, observer=observer, outbox=outbox,
                            alerts=Alerts(options.alert_command), should_stop=should_stop)
        report.execute = executor.run()
        report.waiting = store.ticks.waiting_for_handlers(now=now, handlers=handlers)
        if not should_stop():
            # retention, on by default: the storage's upkeep, by one tick a minute (a run
            # that finished before its day was made waits in the default partition)
            report.upkeep = _upkeep(store, clock)
    except BaseException as exc:
        if executor is not None:
            report.execute = executor.report
        outbox.close(hurry=True)
        observer.close(report.counts(), type(exc).__name__)
        _record(store, clock, report, TickStatus.FAILED, f"{type(exc).__name__}: {exc}"[:1000])
        raise
    # bounded: waits for the deliveries under way; then ends the spans
    outbox.close(hurry=should_stop())
    observer.close(report.counts())
    status = TickStatus.INTERRUPTED if should_stop() else TickStatus.FINISHED
    # (a failed upkeep is said in the record of a tick that did its work)
    error = None if report.upkeep.error is None else f"upkeep: {report.upkeep.error}"[:1000]
    _record(store, clock, report, status, error)
    log.info("tick finished", extra={"action": "tick", "tick_id": tick_id, **report.counts()})
    return report


def _upkeep(store: Store, clock: Clock) -> Upkeep:
    """The storage's upkeep, which never fails a tick that did its runs: an error is logged
    and reported (Upkeep.error, and the tick's record), and the next tick's upkeep tries
    again."""
    try:
        return tick_upkeep(store, now=clock.now()) or Upkeep(busy=True)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("storage upkeep failed (the next tick tries again): %s", error,
                    extra={"action": "retention", "error": error})
        return Upkeep(error=error)


def _record(store: Store, clock: Clock, report: TickReport, status: TickStatus,
            error: str | None) -> None:
    """Leave the tick's record; a tick that cannot reach the database just says so."""
    if report.tick_id is None:
        return
    try:
        store.ticks.finish_tick(report.tick_id, status=status, counts=report.counts(),
                                now=clock.now(), error=error)
    except Exception as exc:
        log.warning("could not record the tick: %s", exc, extra={"action": "tick"})


def _log_lost_ticks(lost: list[LostTick]) -> None:
    """Say whose ticks the tick closed as lost."""
    for t in lost:
        log.warning("tick %s of worker %s (at %s) went away without recording its end: "
                    "closed as lost", t.id, t.worker, t.tick_at.isoformat(),
                    extra={"action": "lost_tick", "tick_id": t.id, "worker": t.worker})


def _handlers(apps: tuple[str, ...]) -> tuple[str, ...]:
    """The handlers this tick can run: those its --app modules register (importing them)."""
    if not apps:
        return ()
    return tuple(sorted(load_apps(apps)))


def _refuse_the_future(store: Store, now: dt.datetime) -> None:
    """Refuse a ``now`` ahead of the database clock: ticking there would decide and run
    slots that are not due yet, for real. Says what the tick would have done."""
    clock = store.now()
    if now - clock <= FUTURE_SKEW:
        return
    due = materialise(store, now, dry_run=True)
    ahead = dt.timedelta(minutes=round((now - clock).total_seconds() / 60))
    raise UsageError(
        f"--now is {format_duration(ahead)} ahead of the database clock "
        f"({clock.isoformat(timespec='seconds')}): this tick would materialise "
        f"{due.materialised} run(s) for slots up to {now.isoformat(timespec='seconds')} and "
        "run them for real, moving the jobs past slots that are not due yet; add --dry-run "
        "to preview it or --allow-future to do it anyway")
