"""``cronjobs worker``: for platforms without cron, and where a queued run must start at
once. Two things run side by side:

- the minute: at the start of every minute of the database's clock it starts ``cronjobs
  tick`` as a child process, exactly as cron would, to materialise the due slots (and keep
  the storage, retry the notifications, close lost ticks): every guarantee of the tick
  holds unchanged, and ticks may overlap safely. Those ticks claim nothing (``max_runs``
  0): the worker runs what they queue.
- the claimer (:mod:`cronjobs.execution.wakeup`): claim passes in this process, woken by a
  ``cronjobs_runs`` notification (``LISTEN`` on the worker's connection: every queued run
  sends one when its transaction commits), by the end of a minute tick, or every poll
  interval whatever happens, so a run whose notification was lost (a lost connection, a
  transaction pooler) still starts.

Each tick gets the worker's :class:`~cronjobs.execution.options.TickOptions` on its stdin.
SIGTERM/SIGINT stop it gracefully: running ticks get SIGTERM and are waited for, the
claimer's runs are interrupted as a stopped tick's are (back in the queue)."""

from __future__ import annotations

import contextlib
import dataclasses
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
from cronjobs.execution.wakeup import Claimer

log = logging.getLogger(__name__)

MARGIN = 0.5  # seconds after the minute starts, so the new minute's slot is due
RELISTEN = 5.0  # seconds between two tries to listen again while it fails


@dataclass
class WorkerReport:
    ticks: int = 0
    failed_ticks: int = 0
    notifications: int = 0  # of queued runs, heard
    listens: int = 0  # times it started listening (1, plus one per lost connection)
    passes: int = 0  # the claimer's passes
    claimed: int = 0  # runs they claimed
    broken: bool = False  # the claimer ended before a stop request (logged why)


LISTEN_MODES = ("auto", "on", "off")


def listens(mode: str, *, prepared: str, own_session: bool) -> bool:
    """Whether the worker listens for queued runs (``--listen``): ``on``, ``off``, or
    ``auto``: unless the connection provably goes through a transaction pooler, where a
    LISTEN is made in a server session the next transaction may not be in. The proof is
    the one ``--prepared-statements auto`` makes (``own_session``: the setting sent at
    connection time was there); with prepared statements ``on`` or ``off`` there was no
    check, and it listens (harmless where it cannot hear: the polling runs anyway)."""
    if mode != "auto":
        return mode == "on"
    return own_session or prepared != "auto"


def seconds_to_next_minute(now: dt.datetime) -> float:
    """From ``now`` to just after the next whole minute."""
    nxt = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return (nxt - now).total_seconds() + MARGIN


def serve(store: Store, claim_store: Store, options: TickOptions, env: Mapping[str, str], *,
          listen: bool, poll: float, should_stop: Callable[[], bool],
          max_ticks: int | None = None) -> WorkerReport:
    """Start a tick with ``options`` (claiming nothing) at every minute, and claim passes
    on ``claim_store`` (a connection of their own) with the same options, at least every
    ``poll`` seconds and at once on every notification of a queued run heard on ``store``
    when ``listen``, until asked to stop (or the claimer ends). Both stores reconnect
    themselves after a lost connection."""
    claimer = Claimer(claim_store, options, poll=poll, should_stop=should_stop)
    report = WorkerReport()
    children: list[subprocess.Popen[bytes]] = []
    listener = _Listener(store, report, claimer, enabled=listen)
    options_json = dataclasses.replace(options, max_runs=0).to_json().encode()

    def reap() -> None:
        if _reap(children, report):
            claimer.nudge()  # a tick ended: the runs it materialised are due

    claimer.start()
    try:
        while not should_stop() and claimer.alive:
            reap()
            if max_ticks is not None and report.ticks >= max_ticks:
                break
            children.append(_start_tick(options_json, env))
            report.ticks += 1
            log.info("tick started", extra={"action": "worker", "pid": children[-1].pid})
            _wait_for_next(store, listener, should_stop, reap)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait()
        _reap(children, report)
        claimer.stop()
        claimer.join()
        report.passes, report.claimed = claimer.report.passes, claimer.report.claimed
        report.broken = claimer.gave_up or claimer.error is not None
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


def _reap(children: list[subprocess.Popen[bytes]], report: WorkerReport) -> int:
    """Forget the ticks that exited; how many did."""
    running = []
    for child in children:
        code = child.poll()
        if code is None:
            running.append(child)
        elif code != 0:
            report.failed_ticks += 1
            log.warning("a tick exited with %s", code, extra={"action": "worker"})
    ended = len(children) - len(running)
    children[:] = running
    return ended


class _Listener:
    """The worker's ``LISTEN`` for queued runs, on its store's session: every notification
    nudges the claimer. A lost session (a database restart, a terminated backend) is
    opened again and listens again, RELISTEN seconds apart at most while that fails;
    meanwhile the claimer's polling finds what is queued."""

    def __init__(self, store: Store, report: WorkerReport, claimer: Claimer, *,
                 enabled: bool) -> None:
        self.store = store
        self.report = report
        self.claimer = claimer
        self.enabled = enabled
        self.listening = False
        self._next_try = 0.0
        if enabled:
            self.listen()

    def listen(self) -> None:
        """LISTEN on the store's session now (a fresh one listens to nothing yet)."""
        self._next_try = time.monotonic() + RELISTEN
        try:
            self.store.notifications.listen_for_runs()
        except CronjobsError as exc:
            log.warning("cannot listen for queued runs (%s): polling until it can",
                        exc.message, extra={"action": "worker"})
            self.listening = False
            return
        self.listening = True
        self.report.listens += 1
        log.info("listening for queued runs", extra={"action": "worker"})

    def reconnected(self) -> None:
        """The store's connection was replaced."""
        if self.enabled:
            self.listen()

    def wait(self, timeout: float) -> None:
        """Up to ``timeout`` seconds for notifications (nudging the claimer on one)."""
        if not self.listening:
            time.sleep(timeout)
            if self.enabled and time.monotonic() >= self._next_try and self.store.reconnect():
                self.listen()
            return
        try:
            heard = self.store.notifications.wait_for_notifications(timeout)
            if heard:
                self.report.notifications += heard
                self.claimer.nudge()
        except CronjobsError as exc:
            log.warning("lost the connection that listens for queued runs (%s): "
                        "connecting again", exc.message, extra={"action": "worker"})
            self.listening = False
            if self.store.reconnect():
                self.listen()


def _wait_for_next(store: Store, listener: _Listener, should_stop: Callable[[], bool],
                   reap: Callable[[], object]) -> None:
    """Until the next minute of the database's clock, a stop request, or the end of the
    claimer, listening. A database blip (retried by the policy, reconnecting) only delays
    the next tick."""
    def again() -> None:
        if store.reconnect():
            listener.reconnected()

    try:
        deadline = time.monotonic() + seconds_to_next_minute(retrying(
            store.now, between=again, give_up=should_stop))
    except CronjobsError as exc:
        log.warning("database unavailable: %s", exc.message, extra={"action": "worker"})
        deadline = time.monotonic() + 5.0
    while not should_stop() and listener.claimer.alive:
        reap()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        listener.wait(min(left, 0.5))
