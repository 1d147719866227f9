"""The Python API: :class:`Client`, for applications (a web app triggering a job from a
request, a deploy script applying its jobs). The CLI's commands call the same library
functions (``cronjobs.core``), so both answer alike: the same frozen rows and results, the
same errors (``cronjobs.errors``), one instant of the database's clock per operation.

:func:`apply_declared` gathers the jobs a file and modules declare and applies them: the
CLI's ``apply`` and :meth:`Client.apply` both call it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cronjobs.core import apply as applying
from cronjobs.core import definitions, explain, operations
from cronjobs.core.declarations import Declaration, check_source, read_jobs_file, to_spec, to_specs
from cronjobs.db.config import resolve_database
from cronjobs.db.connect import open_store
from cronjobs.db.store import Store
from cronjobs.execution.registry import declared, load_apps
from cronjobs.models import Definition, Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Removed:
    definition: Definition
    cancelled_runs: int  # its waiting runs, cancelled


@dataclass(frozen=True)
class JobRun:
    """A run and the name of its job (what ``runs`` lists)."""

    run: Run
    job: str


def apply_declared(store: Store, *, file: str | None = None, modules: Sequence[str] = (),
                   source: str | None = None, prune: bool = False, adopt: bool = False,
                   dry_run: bool = False, crowded_threshold: int | None = None
                   ) -> applying.ApplyResult:
    """Apply the jobs that the jobs ``file`` and the ``modules``' decorators declare, all
    validated before anything is written. The source is ``source``, else the file's own
    ``source``, else :func:`cronjobs.core.apply.default_source`. A job that lands in a
    crowded minute gets a warning in its diff (``JobDiff.crowding``; see
    :func:`cronjobs.core.apply.apply` for ``crowded_threshold``)."""
    found: list[Declaration] = []
    named = None
    if file is not None:
        parsed = read_jobs_file(file)
        named = parsed.source
        found += parsed.declarations
    known = None
    if modules:
        known = set(load_apps(modules))
        found += [Declaration(d.name, d.options, d.where)
                  for d in declared(modules).values()]
    specs = to_specs(found)
    owner = (check_source(source) if source is not None
             else named or applying.default_source(file, modules))
    return applying.apply(store, specs, source=owner, prune=prune, adopt=adopt,
                          dry_run=dry_run, known_handlers=known,
                          crowded_threshold=crowded_threshold)


class Client:
    """cronjobs from Python::

        client = cronjobs.Client()            # the CLI's database: CRONJOBS_DATABASE_URL...
        run = client.trigger("report", payload={"days": 30})

    ``database_url`` None finds the database as the CLI does (``CRONJOBS_DATABASE_URL``,
    ``DATABASE_URL``, libpq's ``PG*`` variables, else the embedded server). One connection,
    opened on first use and again after it was lost; calls from several threads take turns.
    Errors are those of :mod:`cronjobs.errors` (a UsageError for bad input: nothing was
    written)."""

    def __init__(self, database_url: str | None = None, *, connect_timeout: float = 10.0,
                 application_name: str = "cronjobs client") -> None:
        self._target = resolve_database(database_url)
        self._connect_timeout = connect_timeout
        self._application_name = application_name
        self._lock = threading.RLock()
        self._store: Store | None = None

    # -- connection ---------------------------------------------------------------------------

    @contextmanager
    def _using(self) -> Iterator[Store]:
        with self._lock:
            if self._store is None or self._store.conn.closed:
                self._store = open_store(self._target, retry_for=self._connect_timeout,
                                         application_name=self._application_name).store
            yield self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- definitions --------------------------------------------------------------------------

    def define(self, name: str, schedule: str, *, tz: str | None = None,
               command: str | None = None, handler: str | None = None,
               payload: dict[str, Any] | None = None, catchup: str | None = None,
               catchup_limit: int | None = None, starting_deadline: str | None = None,
               overlap: str | None = None, max_attempts: int | None = None,
               backoff: str | None = None, timeout: str | None = None,
               lease: str | None = None, alert_command: str | None = None,
               alert_on_failure: bool | None = None, pause_after_failures: int | None = None,
               group: str | None = None, notify: str | Sequence[str] | None = None,
               notify_on: str | Sequence[str] | None = None,
               keep_succeeded: str | None = None,
               keep_failed: str | None = None,
               crowded_threshold: int | None = None) -> definitions.DefineResult:
        """``cronjobs define``: create or update a job (the whole job: options left out
        take their defaults). ``notify`` is one webhook URL or several; ``notify_on`` a
        list of events (dead, failure, recovery) or a comma-separated string. A job landing
        in a minute that holds more than ``crowded_threshold`` fires of other jobs (None:
        the default) is defined with a warning (``DefineResult.crowding``, also logged as a
        warning of the ``cronjobs.client`` logger)."""
        given = {"schedule": schedule, "tz": tz, "command": command, "handler": handler,
                 "payload": payload, "catchup": catchup, "catchup_limit": catchup_limit,
                 "starting_deadline": starting_deadline, "overlap": overlap,
                 "max_attempts": max_attempts, "backoff": backoff, "timeout": timeout,
                 "lease": lease, "alert_command": alert_command,
                 "alert_on_failure": alert_on_failure,
                 "pause_after_failures": pause_after_failures, "group": group,
                 "notify": notify,
                 "notify_on": notify_on, "keep_succeeded": keep_succeeded,
                 "keep_failed": keep_failed}
        spec = to_spec(Declaration(name, {k: v for k, v in given.items() if v is not None},
                                   "Client.define"))
        with self._using() as store:
            result = definitions.define(store, spec, crowded_threshold=crowded_threshold)
        if result.crowding is not None:
            log.warning("%s", result.crowding.message,
                        extra={"action": "crowded", "job": result.crowding.job})
        return result

    def apply(self, file: str | None = None, *, modules: Sequence[str] = (),
              source: str | None = None, prune: bool = False, adopt: bool = False,
              dry_run: bool = False, crowded_threshold: int | None = None
              ) -> applying.ApplyResult:
        """``cronjobs apply``: make the database match the jobs file and/or the modules'
        decorators, in one transaction; the result is the diff (``dry_run``: not
        applied), each job landing in a crowded minute with a warning
        (``JobDiff.crowding``, also logged as a warning of the ``cronjobs.client``
        logger)."""
        with self._using() as store:
            result = apply_declared(store, file=file, modules=modules, source=source,
                                    prune=prune, adopt=adopt, dry_run=dry_run,
                                    crowded_threshold=crowded_threshold)
        for diff in (*result.added, *result.changed):
            if diff.crowding is not None:
                log.warning("%s: %s", diff.name, diff.crowding.message,
                            extra={"action": "crowded", "job": diff.name})
        return result

    def export(self, *names: str, show_secrets: bool = False) -> applying.Export:
        """``cronjobs export``: the jobs as declarations; the notify URLs masked unless
        ``show_secrets`` (``Export.masked`` names the jobs whose URLs were)."""
        with self._using() as store:
            return applying.export(store, names, show_secrets=show_secrets)

    def jobs(self) -> list[definitions.Listing]:
        with self._using() as store:
            return definitions.list_jobs(store)

    def job(self, name: str) -> definitions.Description:
        """A job's definition, next fire times and latest runs (``describe``)."""
        with self._using() as store:
            return definitions.describe(store, name)

    def pause(self, name: str, *, until: dt.datetime | None = None,
              note: str | None = None) -> Definition:
        with self._using() as store:
            return definitions.pause(store, name, until=until, note=note)

    def resume(self, name: str) -> Definition:
        with self._using() as store:
            return definitions.resume(store, name)

    def remove(self, name: str) -> Removed:
        with self._using() as store:
            return Removed(*definitions.remove(store, name))

    def next_fire_times(self, name: str, *, count: int = 5,
                        start: dt.datetime | None = None) -> definitions.Preview:
        with self._using() as store:
            return definitions.preview_job(store, name, start=start, count=count)

    def explain(self, name: str, *, start: dt.datetime | None = None,
                end: dt.datetime | None = None) -> explain.Explanation:
        with self._using() as store:
            return explain.explain(store, name, start=start, end=end)

    # -- runs ---------------------------------------------------------------------------------

    def trigger(self, name: str, *, payload: dict[str, Any] | None = None,
                force: bool = False, at: dt.datetime | None = None,
                after: dt.timedelta | None = None) -> Run:
        """A run of job ``name`` now, outside its schedule; the job's overlap policy
        applies unless ``force``. With ``at`` (an aware instant) or ``after`` (a delay):
        one run for that later time instead (status ``scheduled``, cancellable), which
        meets the overlap policy when it becomes due."""
        with self._using() as store:
            return operations.trigger(store, name, payload=payload, force=force, at=at,
                                      after=after)

    def retry(self, run_id: int, *, attempts: int = 1, force: bool = False) -> Run:
        with self._using() as store:
            return operations.retry(store, run_id, attempts=attempts, force=force)

    def cancel(self, run_id: int) -> Run:
        with self._using() as store:
            return operations.cancel(store, run_id)

    def runs(self, name: str | None = None, *, statuses: Sequence[str] = (),
             since: dt.datetime | None = None, limit: int = 50) -> list[JobRun]:
        with self._using() as store:
            return [JobRun(run, job) for run, job in operations.list_runs(
                store, name=name, statuses=statuses, since=since, limit=limit)]

    def run(self, run_id: int) -> operations.RunDetail:
        """One run with its attempts (``show``)."""
        with self._using() as store:
            return operations.show(store, run_id)
