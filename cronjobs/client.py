"""The Python API: :class:`Client`, for applications (a web app triggering a job from a
request, a deploy script applying its jobs). The CLI's commands call the same library
functions (``cronjobs.core``), so both answer alike: the same facts about jobs and runs
(:class:`JobInfo`, :class:`RunInfo`, :class:`AttemptInfo`: flat frozen dataclasses, from
:mod:`cronjobs.core.facts`, the one place they are worked out), the same errors
(``cronjobs.errors``, worded for Python: ``force=True`` where the command line says
``--force``), one instant of the database's clock per operation. docs/how-to/python-client.md
teaches it.

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
from cronjobs.core.crowding import Crowding
from cronjobs.core.declarations import Declaration, check_source, read_jobs_file, to_spec, to_specs
from cronjobs.core.facts import AttemptInfo, JobInfo, RunInfo
from cronjobs.core.spec import FIELDS
from cronjobs.db.config import resolve_database
from cronjobs.db.connect import open_store
from cronjobs.db.store import Store
from cronjobs.errors import CronjobsError
from cronjobs.execution.registry import declared, load_apps

__all__ = ["AttemptInfo", "Client", "Defined", "JobInfo", "Removed", "RunInfo",
           "apply_declared"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Defined:
    """What :meth:`Client.define` did: ``outcome`` is "created", "updated" or "unchanged";
    ``warning`` says when no loaded module registers the job's handler."""

    outcome: str
    job: JobInfo
    warning: str | None
    crowding: Crowding | None = None  # it lands in a crowded minute (a warning, also logged)


@dataclass(frozen=True)
class Removed:
    """What :meth:`Client.remove` did: the job as it was removed, and how many of its
    waiting runs were cancelled with it."""

    job: JobInfo
    cancelled_runs: int


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
        """The client's store, opened on first use; an error raised while using it is
        raised worded for Python (:meth:`CronjobsError.for_python`)."""
        with self._lock:
            try:
                if self._store is None or self._store.conn.closed:
                    self._store = open_store(self._target, retry_for=self._connect_timeout,
                                             application_name=self._application_name).store
                yield self._store
            except CronjobsError as exc:
                worded = exc.for_python()
                if worded is exc:
                    raise
                raise worded from exc.__cause__

    def close(self) -> None:
        """Close the client's connection (a later call opens a new one)."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> Client:
        """``with Client() as client:`` closes the connection at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- definitions --------------------------------------------------------------------------

    def define(self, name: str, schedule: str, *, tz: str | None = None,
               command: str | None = None, handler: str | None = None,
               payload: dict[str, Any] | str | None = None, catchup: str | None = None,
               catchup_limit: int | None = None, starting_deadline: str | None = None,
               overlap: str | None = None, max_attempts: int | None = None,
               backoff: str | None = None, timeout: str | None = None,
               lease: str | None = None, alert_command: str | None = None,
               alert_on_failure: bool | None = None, pause_after_failures: int | None = None,
               group: str | None = None, notify: str | Sequence[str] | None = None,
               notify_on: str | Sequence[str] | None = None,
               keep_succeeded: str | None = None,
               keep_failed: str | None = None,
               crowded_threshold: int | None = None) -> Defined:
        """Create or update job ``name``, stating the whole job as a jobs file does: the
        options left out take their defaults, on a job that exists too (unlike ``cronjobs
        define`` on a job that exists, which changes only the options given; a change of
        kind needs no flag here). Durations are strings as on the command line
        ("30s", "10m", "1h"). ``notify`` is one webhook URL or several; ``notify_on`` a
        list of events (dead, failure, recovery) or a comma-separated string. A job landing
        in a minute that holds more than ``crowded_threshold`` fires of other jobs (None:
        the default) is defined with a warning (``Defined.crowding``, also logged as a
        warning of the ``cronjobs.client`` logger). Raises :class:`cronjobs.UsageError`
        for bad input (nothing is written)."""
        passed = dict(locals())  # the keywords: a test keeps them those of core.spec.FIELDS
        given = {field.name: passed[field.name] for field in FIELDS
                 if passed[field.name] is not None}
        spec = to_spec(Declaration(name, given, "Client.define"))
        with self._using() as store:
            done = definitions.define(store, spec, crowded_threshold=crowded_threshold)
            result = Defined(done.outcome, definitions.job_info(done.definition, store.now()),
                             done.warning, done.crowding)
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

    def jobs(self) -> list[JobInfo]:
        """Every job (not removed ones), by name, as ``cronjobs list`` shows them: state,
        next fire time, latest run."""
        with self._using() as store:
            return [listing.info for listing in definitions.list_jobs(store)]

    def job(self, name: str) -> JobInfo:
        """Job ``name`` (``cronjobs describe``); :class:`cronjobs.JobNotFound` if there is
        none."""
        with self._using() as store:
            return definitions.describe(store, name, count=1, runs=1).info

    def pause(self, name: str, *, until: dt.datetime | None = None,
              note: str | None = None) -> JobInfo:
        """Pause job ``name`` (until ``until``, an aware instant, if given): its slots are
        recorded as paused, not run. ``note`` says why (shown by ``describe``)."""
        with self._using() as store:
            return definitions.job_info(definitions.pause(store, name, until=until, note=note),
                                  store.now())

    def resume(self, name: str) -> JobInfo:
        """Resume job ``name`` from now; the slots it missed while paused are not run."""
        with self._using() as store:
            return definitions.job_info(definitions.resume(store, name), store.now())

    def remove(self, name: str) -> Removed:
        """Remove job ``name``: its waiting runs are cancelled, its running runs asked to
        stop; its history stays readable (``runs(name)``)."""
        with self._using() as store:
            definition, cancelled = definitions.remove(store, name)
            return Removed(definitions.job_info(definition, store.now()), cancelled)

    def next_fire_times(self, name: str, *, count: int = 5,
                        start: dt.datetime | None = None) -> list[dt.datetime]:
        """The next ``count`` fire times of job ``name`` (aware, UTC). Without ``start``:
        the slots the tick will run (none while the job is paused without an end, and after
        the pause's end when it has one: the first is ``job(name).next_fire_at``). With
        ``start``: its schedule's fire times after that instant."""
        with self._using() as store:
            return definitions.fire_times(store, name, count=count, start=start)

    def explain(self, name: str, *, start: dt.datetime | None = None,
                end: dt.datetime | None = None) -> explain.Explanation:
        """What became of each slot of job ``name`` between ``start`` and ``end`` (default:
        the last 24 hours): its run, or why it was skipped (``cronjobs explain``)."""
        with self._using() as store:
            return explain.explain(store, name, start=start, end=end)

    # -- runs ---------------------------------------------------------------------------------

    def trigger(self, name: str, *, payload: dict[str, Any] | None = None,
                force: bool = False, at: dt.datetime | None = None,
                after: dt.timedelta | None = None) -> RunInfo:
        """A run of job ``name`` now, outside its schedule (the next tick runs it); the
        job's overlap policy applies unless ``force`` (:class:`cronjobs.Refused`
        otherwise). With ``at`` (an aware instant) or ``after`` (a delay): one run for that
        later time instead (state ``scheduled``, cancellable), which meets the overlap
        policy when it becomes due."""
        with self._using() as store:
            run = operations.trigger(store, name, payload=payload, force=force, at=at,
                                     after=after)
            return operations.run_info(store, run.id)

    def retry(self, run_id: int, *, attempts: int = 1, force: bool = False) -> RunInfo:
        """Send a failed, dead or cancelled run back to the queue now with ``attempts``
        more attempts, keeping its history (a dead run is acknowledged). A run that
        succeeded runs again only with ``force``, as a new run of its slot (the result is
        that new run)."""
        with self._using() as store:
            run = operations.retry(store, run_id, attempts=attempts, force=force)
            return operations.run_info(store, run.id)

    def cancel(self, run_id: int) -> RunInfo:
        """Cancel a waiting run now; a running run is asked to stop (its worker stops it at
        the next heartbeat: ``cancel_requested_at`` is set)."""
        with self._using() as store:
            run = operations.cancel(store, run_id)
            return operations.run_info(store, run.id)

    def ack(self, run_id: int, *, by: str | None = None) -> RunInfo:
        """Acknowledge dead run ``run_id`` (``by``: who, as recorded): it no longer keeps
        ``status --check`` and ``/healthz`` red. Acknowledging it again changes nothing."""
        with self._using() as store:
            return operations.acknowledge(store, run_id, by=by).runs[0]

    def ack_all(self, name: str, *, by: str | None = None) -> list[RunInfo]:
        """Acknowledge every dead run of job ``name`` nobody acknowledged yet; the runs it
        acknowledged."""
        with self._using() as store:
            return list(operations.acknowledge_all(store, name, by=by).runs)

    def runs(self, name: str | None = None, *, states: Sequence[str] = (),
             since: dt.datetime | None = None, limit: int = 50) -> list[RunInfo]:
        """Runs, newest first: of job ``name`` (a removed job's too), or of every job;
        only those in ``states`` (e.g. ``["failed", "dead"]``) if given, created since
        ``since`` if given, at most ``limit`` (1 to 10,000)."""
        with self._using() as store:
            return operations.list_runs(store, name=name, statuses=states, since=since,
                                        limit=limit)

    def run(self, run_id: int) -> RunInfo:
        """Run ``run_id`` with its attempts (``cronjobs show``); :class:`cronjobs.RunNotFound`
        if there is none."""
        with self._using() as store:
            return operations.show(store, run_id).info
