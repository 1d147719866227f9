"""``cronjobs worker``: for platforms without cron. It is a tiny cron of its own: at the
start of every minute of the database's clock (and at once when ``cronjobs trigger`` sends
a notification) it starts ``cronjobs tick`` as a child process, exactly as cron would, so
every guarantee of the tick holds unchanged — ticks may overlap safely. Each tick gets the
worker's :class:`~cronjobs.execution.options.TickOptions` on its stdin. SIGTERM/SIGINT
stop it gracefully: running ticks get SIGTERM and are waited for."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cronjobs.db.retry import retrying
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
from cronjobs.execution.options import TickOptions

log = logging.getLogger(__name__)

MARGIN = 0.5  # seconds after the minute starts, so the new minute's slot is due


@dataclass
class WorkerReport:
    ticks: int = 0
    failed_ticks: int = 0


def seconds_to_next_minute(now: dt.datetime) -> float:
    """From ``now`` to just after the next whole minute."""
    nxt = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return (nxt - now).total_seconds() + MARGIN


def serve(store: Store, options: TickOptions, env: Mapping[str, str], *,
          should_stop: Callable[[], bool], max_ticks: int | None = None) -> WorkerReport:
    """Start a tick with ``options`` at every minute (and on notification) until asked to
    stop. ``store`` reconnects itself after a lost connection."""
    report = WorkerReport()
    children: list[subprocess.Popen[bytes]] = []
    listening = _listen(store)
    options_json = options.to_json().encode()
    try:
        while not should_stop():
            _reap(children, report)
            if max_ticks is not None and report.ticks >= max_ticks:
                break
            children.append(_start_tick(options_json, env))
            report.ticks += 1
            log.info("tick started", extra={"action": "worker", "pid": children[-1].pid})
            listening = _wait_for_next(store, listening, should_stop,
                                       lambda: _reap(children, report))
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait()
        _reap(children, report)
    return report


def _start_tick(options_json: bytes, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``cronjobs tick``, its options on its stdin (in the environment, they would reach
    its jobs)."""
    child = subprocess.Popen([sys.executable, "-m", "cronjobs", "tick", "--options-stdin"],
                             stdin=subprocess.PIPE, env=dict(env))
    assert child.stdin is not None  # noqa: S101 - started with stdin=PIPE
    with contextlib.suppress(BrokenPipeError):  # it died at once: reaped as failed
        child.stdin.write(options_json)
    with contextlib.suppress(BrokenPipeError):
        child.stdin.close()
    return child


def _reap(children: list[subprocess.Popen[bytes]],
          report: WorkerReport) -> list[subprocess.Popen[bytes]]:
    running = []
    for child in children:
        code = child.poll()
        if code is None:
            running.append(child)
        elif code != 0:
            report.failed_ticks += 1
            log.warning("a tick exited with %s", code, extra={"action": "worker"})
    children[:] = running
    return running


def _listen(store: Store) -> bool:
    try:
        store.notifications.listen_for_triggers()
    except CronjobsError as exc:  # e.g. behind a transaction-pooling PgBouncer
        log.info("no notifications (%s): ticking every minute only", exc.message,
                 extra={"action": "worker"})
        return False
    return True


def _wait_for_next(store: Store, listening: bool, should_stop: Callable[[], bool],
                   reap: Callable[[], object]) -> bool:
    """Sleep until the next minute of the database's clock, a trigger notification, or a
    stop request; whether it is listening for notifications now. A database blip (retried
    by the policy, reconnecting) only delays the next tick."""
    def again() -> None:
        nonlocal listening
        if store.reconnect():  # a fresh session listens to nothing yet
            listening = _listen(store)

    try:
        deadline = time.monotonic() + seconds_to_next_minute(retrying(
            store.now, between=again, give_up=should_stop))
    except CronjobsError as exc:
        log.warning("database unavailable: %s", exc.message, extra={"action": "worker"})
        deadline = time.monotonic() + 5.0
    while not should_stop():
        reap()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        step = min(left, 0.5)
        if listening:
            try:
                if store.notifications.wait_for_notification(step):
                    log.info("triggered: ticking now", extra={"action": "worker"})
                    break
            except CronjobsError:
                listening = False
        else:
            time.sleep(step)
    return listening
