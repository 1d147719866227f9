"""Alert commands: run when a run becomes dead (and, if asked, when an attempt fails or a
job is paused for failing), with the run's details in the environment, like systemd's
``OnFailure=``. They run in the background of the tick, bounded by a timeout."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from cronjobs.execution.context import JobContext
from cronjobs.execution.runners import Work
from cronjobs.execution.runners.process import Running
from cronjobs.execution.runners.shell import ShellRunner
from cronjobs.models import AttemptOutcome, JobFailure, Kind, RunStatus

log = logging.getLogger(__name__)

TIMEOUT = 60.0


class AlertKind(StrEnum):
    """What an alert is about (``CRONJOBS_ALERT_EVENT``)."""

    DEAD = "dead"  # a run exhausted its attempts
    FAILED = "failed"  # an attempt failed (alerted with --alert-on-failure)
    PAUSED = "paused"  # its failures in a row paused the job


@dataclass(frozen=True)
class Event:
    kind: AlertKind
    run_id: int
    job: str
    scheduled_for: dt.datetime
    attempt: int
    status: RunStatus
    error: str | None
    exit_code: int | None


class Alerting(Protocol):
    """What the executor tells about failures (:class:`Alerts`, or :class:`NoAlerts`)."""

    def failed(self, failure: JobFailure, event: Event) -> None:
        """A failed attempt (``event``) was counted against its job (``failure``)."""

    def poll(self) -> None:
        """Once per pass of the executor's loop."""

    def wait(self) -> None:
        """The tick ends: let what was started finish."""


class NoAlerts:
    """No alert commands."""

    def failed(self, failure: JobFailure, event: Event) -> None:
        pass

    def poll(self) -> None:
        pass

    def wait(self) -> None:
        pass


NO_ALERTS = NoAlerts()


class Alerts:
    """The alert commands started by one tick. The alerts of one run start in the order they
    were fired, each after the one before has ended (a run that dies and pauses its job
    says "dead", then "paused"); those of different runs run side by side."""

    def __init__(self, default_command: str | None = None) -> None:
        self.default_command = default_command  # for jobs without their own
        self.running: list[tuple[Event, Running]] = []
        self.pending: list[tuple[str, Event]] = []  # waiting for an earlier alert of its run

    def failed(self, failure: JobFailure, event: Event) -> None:
        """Fire the alert command the outcome calls for: on a dead run, on any failure
        with ``alert_on_failure``, and when the failure paused the job."""
        command = failure.alert_command or self.default_command
        if command is None:
            return
        if event.kind == AlertKind.DEAD or failure.alert_on_failure:
            self.fire(command, event)
        if failure.just_paused:
            self.fire(command, dataclasses.replace(event, kind=AlertKind.PAUSED,
                                                   error=failure.pause_note))

    def fire(self, command: str, event: Event) -> None:
        if self._busy(event.run_id):
            self.pending.append((command, event))
        else:
            self._start(command, event)

    def _busy(self, run_id: int) -> bool:
        return (any(e.run_id == run_id for e, _ in self.running)
                or any(e.run_id == run_id for _, e in self.pending))

    def _start(self, command: str, event: Event) -> None:
        env = dict(os.environ)
        env.update({
            "CRONJOBS_ALERT_EVENT": event.kind.value,
            "CRONJOBS_STATUS": event.status.value,
            "CRONJOBS_ERROR": event.error or "",
            "CRONJOBS_EXIT_CODE": "" if event.exit_code is None else str(event.exit_code),
        })
        context = JobContext(run_id=event.run_id, job=event.job,
                             scheduled_for=event.scheduled_for, attempt=event.attempt,
                             payload={})
        work = Work(context=context, kind=Kind.COMMAND, command=command, handler=None,
                    timeout=TIMEOUT, kill_grace=5.0, env=env, output_limit=4096)
        log.warning("alert: run %s of %s is %s", event.run_id, event.job, event.kind.value,
                    extra={"action": "alert", "run_id": event.run_id, "job": event.job})
        self.running.append((event, ShellRunner().start(work)))

    def poll(self) -> None:
        still = []
        for event, job in self.running:
            result = job.poll()
            if result is None:
                still.append((event, job))
            elif result.outcome != AttemptOutcome.SUCCEEDED:
                log.warning("alert command for run %s failed: %s", event.run_id, result.error,
                            extra={"action": "alert", "run_id": event.run_id,
                                   "job": event.job})
        self.running = still
        waiting, self.pending = self.pending, []
        for command, event in waiting:
            self.fire(command, event)  # starts it when its run's earlier alerts have ended

    def wait(self) -> None:
        """Let the alert commands finish (each is bounded by its timeout), the queued ones
        too."""
        while self.running or self.pending:
            for _, job in self.running:
                job.wait()
            self.poll()
