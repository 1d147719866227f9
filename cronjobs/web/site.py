"""What every route shares: how the server was started, its pool of connections, its
templates and the latest verdict on the installation's health."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg_pool
from starlette.requests import Request

from cronjobs.core.health import Status, status
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.connect import SESSION_OPTIONS, connection_kwargs, prepare_pooled
from cronjobs.db.store import Store
from cronjobs.durations import format_duration
from cronjobs.errors import DatabaseUnavailable
from cronjobs.reports import StartLateness
from cronjobs.web.outlooks import Outlooks
from cronjobs.web.render import Renderer
from cronjobs.web.security import Admin

# The sessions' usual limits, and no JIT compilation: the statistics of a million-run table
# make the planner compile a per-job query such as job_stats, which then spends more time
# compiling (about a second) than running.
OPTIONS = SESSION_OPTIONS + " -c jit=off"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """How `cronjobs serve` was started."""

    conninfo: str = field(repr=False)  # unmasked: for connecting only, never shown
    admin_token: str | None = field(default=None, repr=False)
    refresh: dt.timedelta = dt.timedelta(seconds=10)
    thresholds: Thresholds = field(default_factory=Thresholds)
    metrics_per_job: bool | None = None  # None: auto (see core/metrics.py)
    pool_size: int = 4
    pool_timeout: float = 10.0  # seconds a request waits for a connection, then 503
    application_name: str = "cronjobs serve"
    # --prepared-statements: auto, on or off (see Site.__init__)
    prepared: str = "auto"
    # False where the server (a pooler) refuses startup options: the pool sends none
    startup_options: bool = True
    # how long every page's health banner may reuse the latest verdict (see Site.verdict)
    verdict_for: dt.timedelta = dt.timedelta(seconds=5)
    # how long the start lateness is kept before a refresh off the request path (see
    # Site.lateness); zero: worked out at every verdict
    lateness_for: dt.timedelta = dt.timedelta(seconds=60)


class Site:
    """What the routes share: the settings, the pool of connections and the templates."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.admin = Admin(settings.admin_token) if settings.admin_token else None
        self.render = Renderer(self.admin, settings.refresh)
        self.outlooks = Outlooks()  # the forecast page's, shared by the requests
        # Every statement runs prepared where --prepared-statements allows it (auto: on a
        # session of the connection's own, never through a transaction pooler): parsed,
        # and once PostgreSQL finds its generic plan as good, planned once per connection
        # rather than at every request. With 100,000 jobs that takes the verdict of
        # /healthz from about 34 to 14 ms (most of it planning job_problems over every
        # partition of the history). Each connection sends a marker of its own.
        options = OPTIONS if settings.startup_options else ""
        self.pool = psycopg_pool.ConnectionPool(
            settings.conninfo, min_size=1, max_size=settings.pool_size, open=False,
            kwargs=lambda: connection_kwargs(settings.conninfo,
                                             application_name=settings.application_name,
                                             options=options, prepared=settings.prepared),
            configure=lambda conn: prepare_pooled(conn, settings.prepared),
            check=psycopg_pool.ConnectionPool.check_connection,
            timeout=settings.pool_timeout,
            name="cronjobs-serve")
        self._verdict: tuple[float, Status] | None = None  # (monotonic time, verdict)
        self._verdict_lock = threading.Lock()
        self._lateness: tuple[float, StartLateness] | None = None  # (monotonic time, figures)
        self._lateness_lock = threading.Lock()
        self._lateness_refreshing = False

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        """A store on a pooled connection, for one request."""
        try:
            with self.pool.connection() as conn:
                yield Store(conn)
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailable(
                "the database is busy or unreachable: no connection within "
                f"{format_duration(self.settings.pool_timeout)}") from exc


    def verdict(self, store: Store, *, fresh: bool = False) -> Status:
        """The installation's health as /healthz answers it and every page's banner shows
        it: `status --check`'s verdict, with the server's thresholds (only the jobs that may
        have a problem are read, the history's sizes are estimated, the jobs are not
        counted: a fraction of the work).

        /healthz asks for a ``fresh`` one. A page reuses the latest if it is younger than
        ``verdict_for`` (the banner says when it was checked): with many jobs a verdict can
        cost a second, and every open page refreshes every few seconds. One is worked out
        at a time; the pages that ask meanwhile wait for it. An action forgets it."""
        with self._verdict_lock:
            kept = self._verdict
            age = self.settings.verdict_for.total_seconds()
            if not fresh and kept is not None and time.monotonic() - kept[0] < age:
                return kept[1]
            now = store.now()
            lateness = self.lateness(store, now)
            # Its statements, prepared (see __init__), run their generic plans: each is
            # written to read a range of an index whatever its values, and a plan made for
            # the values at every request is most of the cost of some (see generic_plans
            # in db/queries/session.sql).
            with store.session.generic_plans():
                found = status(store, self.settings.thresholds, now=now, exact_sizes=False,
                               every_job=False, lateness=lateness, count_jobs=False)
            self._verdict = (time.monotonic(), found)
            return found

    def lateness(self, store: Store, now: dt.datetime) -> StartLateness:
        """The start lateness the verdict and /metrics show: p50 and p99 over the last hour
        and day, kept for ``lateness_for`` (a minute). Its cost follows the runs of the day
        (reading and sorting them: about 0.3 s at 144,000 runs a day), not the jobs, so a
        probe must not pay it: once the figures are older than that, one refresh runs in a
        thread of its own and the requests meanwhile answer with the kept figures (their
        ``as_of`` says when). Only the first request after the start works them out itself,
        on ``store`` at ``now``."""
        keep = self.settings.lateness_for.total_seconds()
        with self._lateness_lock:
            kept = self._lateness
            if kept is not None and keep > 0:
                if time.monotonic() - kept[0] >= keep and not self._lateness_refreshing:
                    self._lateness_refreshing = True
                    threading.Thread(target=self._refresh_lateness, daemon=True,
                                     name="cronjobs-serve-lateness").start()
                return kept[1]
        return self._keep_lateness(store, now)

    def _keep_lateness(self, store: Store, now: dt.datetime) -> StartLateness:
        """Work the start lateness out at ``now``, and keep it."""
        late = store.reports.start_lateness(now=now)
        with self._lateness_lock:
            self._lateness = (time.monotonic(), late)
        return late

    def _refresh_lateness(self) -> None:
        """The refresh Site.lateness starts, on a connection of its own. A failure keeps the
        older figures (the next request tries again) and is logged: the verdict's own queries
        report an unreachable database."""
        try:
            with self.store() as store:
                self._keep_lateness(store, store.now())
        except Exception:  # a thread of its own: nothing above it to catch
            log.warning("could not refresh the start lateness; the older figures stay",
                        exc_info=True, extra={"action": "serve"})
        finally:
            with self._lateness_lock:
                self._lateness_refreshing = False

    def forget_verdict(self) -> None:
        """After an action: the next page works the verdict out again."""
        with self._verdict_lock:
            self._verdict = None


def site_of(request: Request) -> Site:
    site: Site = request.app.state.site
    return site


