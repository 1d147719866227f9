"""The ``cronjobs`` command line. Each command parses its input, calls one library
function and renders the result: no SQL and no clock here.

This module holds the group, what the commands share, and the commands that run every
minute (`tick`, and `worker`, which starts ticks); the others are in ``cronjobs.commands``,
imported only when one of them is asked for: building them all would cost every tick.

Exit codes: 0 success; 1 the world failed (database unreachable, internal error);
2 bad input or configuration (nothing was written).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from cronjobs import __version__
from cronjobs.config import DatabaseTarget, resolve_database
from cronjobs.errors import CronjobsError

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNHEALTHY = 3

DURATION_HELP = "a duration such as 90s, 5m, 2h, 1d or 1h30m"
TIMES_HELP = "see 'Times and durations' in the README"


class App:
    """What every command shares: where the database is, and the user's modules."""

    def __init__(self, target: DatabaseTarget, apps: tuple[str, ...], connect_timeout: float,
                 verbose: int) -> None:
        self.target = target
        self.apps = apps
        self.connect_timeout = connect_timeout
        self.verbose = verbose
        self._connected: Any = None

    def store(self) -> Any:
        """Connect on first use (announcing the embedded default once, on stderr)."""
        if self._connected is None:
            from cronjobs.db import open_store

            self._connected = open_store(
                self.target,
                retry_for=self.connect_timeout,
                announce=lambda text: click.echo(text, err=True),
                application_name=self.application_name(),
            )
            click.get_current_context().call_on_close(self._connected.store.close)
        return self._connected.store

    def reconnect(self) -> Any:
        """A fresh store on the same database (after a connection was lost)."""
        from cronjobs.db import connect
        from cronjobs.store import Store

        self.store()
        return Store(connect(self._connected.conninfo, retry_for=self.connect_timeout,
                             application_name=self.application_name()))

    def application_name(self) -> str:
        """`cronjobs <command> <host>:<pid>`, so that pg_stat_activity names the worker."""
        from cronjobs.db import worker_name

        command = click.get_current_context().info_name or "cronjobs"
        return f"cronjobs {command} {worker_name()}"

    def handlers(self) -> set[str] | None:
        """Registered handler names, or None when no --app module is configured."""
        if not self.apps:
            return None
        from cronjobs.registry import load_apps

        return set(load_apps(self.apps))


pass_app = click.make_pass_decorator(App)


def emit(data: Any, text: str, as_json: bool) -> None:
    from cronjobs.render import to_json

    click.echo(to_json(data) if as_json else text)


def json_option(func: Callable[..., T]) -> Callable[..., T]:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a JSON document (stable shape, see the README).")(func)


def _split_apps(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


class _Group(click.Group):
    """The cronjobs group: loads ``cronjobs.commands`` when a command it does not hold yet
    is asked for, or when the commands are listed (``--help``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            _load_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _load_commands()
        return super().list_commands(ctx)


def _load_commands() -> None:
    import cronjobs.commands  # noqa: F401 - its commands register on main_group


@click.group(cls=_Group,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100,
                               "auto_envvar_prefix": "CRONJOBS"})
@click.option("--database-url", metavar="URL", allow_from_autoenv=False,
              help="PostgreSQL URL or conninfo. Default: $CRONJOBS_DATABASE_URL, then "
                   "$DATABASE_URL, then libpq's PG* variables (if PGHOST or PGDATABASE is set), "
                   "then the embedded server.")
@click.option("--app", "apps", metavar="MODULE", multiple=True, envvar="CRONJOBS_APP",
              help="Python module(s) registering handlers with @cronjobs.job "
                   "(repeatable or comma-separated; env CRONJOBS_APP).")
@click.option("--connect-timeout", default="10s", show_default=True, metavar="DURATION",
              envvar="CRONJOBS_CONNECT_TIMEOUT",
              help="How long to keep retrying a database that cannot be reached.")
@click.option("-v", "--verbose", count=True, help="Log more (repeat for debug).")
@click.version_option(__version__, "--version", prog_name="cronjobs")
@click.pass_context
def main_group(ctx: click.Context, database_url: str | None, apps: tuple[str, ...],
               connect_timeout: str, verbose: int) -> None:
    """Scheduled jobs kept in PostgreSQL, run by `cronjobs tick` from cron or Kubernetes.

    \b
    Quick start:
      cronjobs define nightly_cleanup "0 3 * * *"        # a @cronjobs.job handler
      cronjobs define backup "0 2 * * *" --command "pg_dump mydb > /backups/db.sql"
      cronjobs list
      cronjobs next backup --count 3

    Without a configured database, an embedded PostgreSQL is started in
    $CRONJOBS_HOME (default: your user data directory) and left running.
    """
    from cronjobs.durations import parse_duration

    _configure_logging(verbose)
    ctx.obj = App(
        target=resolve_database(database_url),
        apps=_split_apps(apps),
        connect_timeout=parse_duration(connect_timeout, option="--connect-timeout")
        .total_seconds(),
        verbose=verbose,
    )


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ScrubbingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


class _ScrubbingFormatter(logging.Formatter):
    """Log records, tracebacks included, with every password masked (see config.scrub)."""

    def format(self, record: logging.LogRecord) -> str:
        from cronjobs.config import scrub

        return scrub(super().format(record))


# -- the tick ---------------------------------------------------------------------------------

@main_group.command()
@click.option("--now", "now", metavar="TIME",
              help="Tick as if the database clock said this (tests, what-if runs). Leases "
                   f"still use the database clock. An instant or a date ({TIMES_HELP}).")
@click.option("--dry-run", is_flag=True,
              help="Print what would be materialised; write nothing, run nothing.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Runs executed at the same time by this tick.")
@click.option("--max-runs", type=click.IntRange(0), default=None,
              help="Claim at most this many runs (0: only materialise).")
@click.option("--max-runtime", default="45s", show_default=True, metavar="DURATION",
              help="Stop claiming after this long, so that ticks started every minute do not "
                   "pile up; runs already started are finished.")
@click.option("--grace", default="25s", show_default=True, metavar="DURATION",
              help="On SIGTERM/SIGINT: how long running jobs get after SIGTERM before they "
                   "are killed (keep it below Kubernetes' terminationGracePeriodSeconds).")
@click.option("--alert-command", metavar="SHELL", envvar="CRONJOBS_ALERT_COMMAND",
              help="Alert command for jobs that have none of their own (env "
                   "CRONJOBS_ALERT_COMMAND).")
@click.option("--retention", metavar="DURATION", envvar="CRONJOBS_RETENTION",
              help="Prune a little finished history older than this on every tick (env "
                   "CRONJOBS_RETENTION), e.g. 30d.")
@click.option("--handlers-only", is_flag=True, envvar="CRONJOBS_HANDLERS_ONLY",
              help="Refuse shell-command jobs: only registered Python handlers run (env "
                   "CRONJOBS_HANDLERS_ONLY=1). Whoever can write job_definitions can otherwise "
                   "run commands as this worker's OS user.")
@click.option("--allow-command", "allowed_commands", metavar="GLOB", multiple=True,
              envvar="CRONJOBS_ALLOW_COMMANDS",
              help="Only run shell commands matching one of these globs (repeatable; env "
                   "CRONJOBS_ALLOW_COMMANDS, space-separated).")
@click.option("--in-process", is_flag=True, envvar="CRONJOBS_IN_PROCESS",
              help="Run Python handlers in threads of the tick instead of a fresh "
                   "interpreter per run (env CRONJOBS_IN_PROCESS=1): tens of times faster, "
                   "but a handler that overruns its timeout or is cancelled cannot be "
                   "killed: it is recorded as such at once and the tick exits as soon as its "
                   "other runs end. Shell commands always run in their own processes.")
@json_option
@pass_app
def tick(app: App, now: str | None, dry_run: bool, concurrency: int, max_runs: int | None,
         max_runtime: str, grace: str, alert_command: str | None, retention: str | None,
         handlers_only: bool, allowed_commands: tuple[str, ...], in_process: bool,
         as_json: bool) -> None:
    """Materialise due runs (exactly once per slot), run them, record the results, exit.

    Run it every minute, from cron (`* * * * * cronjobs tick`) or a Kubernetes CronJob, on
    as many hosts as you like: the database makes sure every slot is decided once and every
    run is executed by one worker at a time. Execution is at least once: a run whose worker
    died is retried after its lease expires, so make jobs idempotent on (job, slot).

    One summary line goes to stderr; -v logs every decision; --json prints the full report.
    Exit code 0 when the tick did its work (failed jobs are recorded, not tick failures).
    """
    from cronjobs.db import worker_name
    from cronjobs.durations import parse_bounded
    from cronjobs.instants import parse_instant
    from cronjobs.render import decisions_text, tick_json, tick_summary
    from cronjobs.tick import TickOptions
    from cronjobs.tick import tick as run_tick

    at = parse_instant(now, option="--now") if now is not None else None
    second, day = dt.timedelta(seconds=1), dt.timedelta(days=1)
    options = TickOptions(
        now=at, dry_run=dry_run, worker=worker_name(), concurrency=concurrency,
        max_runs=max_runs,
        max_runtime=parse_bounded(max_runtime, option="--max-runtime", minimum=second,
                                  maximum=day).total_seconds(),
        grace=parse_bounded(grace, option="--grace", minimum=second,
                            maximum=dt.timedelta(hours=1)).total_seconds(),
        apps=app.apps,
        alert_command=alert_command or None,
        retention=parse_bounded(retention, option="--retention", minimum=dt.timedelta(hours=1),
                                maximum=dt.timedelta(days=3650)) if retention else None,
        handlers_only=handlers_only,
        allowed_commands=allowed_commands,
        in_process=in_process,
    )
    store = app.store()
    with _stop_on_signals() as stopped:
        report = run_tick(store, options, reconnect=app.reconnect, should_stop=stopped)
    if as_json:
        emit(tick_json(report), "", True)
    elif dry_run or app.verbose:
        click.echo(decisions_text(report))
    click.echo(tick_summary(report), err=True)


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[Callable[[], bool]]:
    """SIGTERM and SIGINT ask the tick to stop gracefully instead of killing it."""
    import signal

    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield lambda: bool(received)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@main_group.command()
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Runs executed at the same time by each tick.")
@click.option("--grace", default="25s", show_default=True, metavar="DURATION",
              help="On SIGTERM: how long running jobs get before they are killed.")
@click.option("--handlers-only", is_flag=True, envvar="CRONJOBS_HANDLERS_ONLY",
              help="Refuse shell-command jobs (see `cronjobs tick --help`).")
@click.option("--allow-command", "allowed_commands", metavar="GLOB", multiple=True,
              envvar="CRONJOBS_ALLOW_COMMANDS", help="Shell-command allow-list (globs).")
@click.option("--retention", metavar="DURATION", envvar="CRONJOBS_RETENTION",
              help="Prune a little history older than this on every tick.")
@click.option("--in-process", is_flag=True, envvar="CRONJOBS_IN_PROCESS",
              help="Run Python handlers in threads of each tick (see `cronjobs tick --help`).")
@click.option("--max-ticks", type=click.IntRange(1), hidden=True)
@pass_app
def worker(app: App, concurrency: int, grace: str, handlers_only: bool,
           allowed_commands: tuple[str, ...], retention: str | None, in_process: bool,
           max_ticks: int | None) -> None:
    """Run forever, ticking at the start of every minute — for platforms without cron.

    It starts `cronjobs tick` as a child process each minute of the database's clock (and at
    once when `cronjobs trigger` is used), exactly as cron would: same guarantees, ticks may
    overlap. SIGTERM/SIGINT stop it gracefully (running ticks get SIGTERM and --grace).
    Prefer cron or a Kubernetes CronJob where you have them.
    """
    import os

    from cronjobs.worker import serve

    argv = ["tick", "--concurrency", str(concurrency), "--grace", grace]
    if handlers_only:
        argv.append("--handlers-only")
    if in_process:
        argv.append("--in-process")
    for pattern in allowed_commands:
        argv += ["--allow-command", pattern]
    if retention:
        argv += ["--retention", retention]
    env = dict(os.environ)
    if app.target.conninfo is not None:  # never in argv, where `ps` would show a password
        env["CRONJOBS_DATABASE_URL"] = app.target.conninfo
    if app.apps:
        env["CRONJOBS_APP"] = ",".join(app.apps)
    store = app.store()
    with _stop_on_signals() as stopped:
        report = serve(store, argv, env, should_stop=stopped, reconnect=app.reconnect,
                       max_ticks=max_ticks)
    click.echo(f"worker stopped after {report.ticks} tick(s), {report.failed_ticks} failed",
               err=True)


# -- entry point ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; turn cronjobs errors into one clear line and a documented exit code."""
    try:
        code = main_group.main(args=argv, prog_name="cronjobs", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILURE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except CronjobsError as exc:
        from cronjobs.config import scrub

        click.echo(f"error: {scrub(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        from cronjobs.config import scrub

        if logging.getLogger().isEnabledFor(logging.INFO):
            logging.getLogger("cronjobs").exception("internal error")
        click.echo(f"internal error: {scrub(f'{type(exc).__name__}: {exc}')} "
                   "(run with -v for a traceback)", err=True)
        sys.exit(EXIT_FAILURE)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def run() -> NoReturn:
    """The ``cronjobs`` executable and ``python -m cronjobs``: :func:`main` in a process of
    its own, which on its way out freezes the garbage collector.

    The interpreter's last collections at exit walk every object the imports created: 30 ms
    after importing psycopg alone, on every tick. They would free memory for a process that
    is ending. Exit handlers still run (logging is flushed) and an object still goes when its
    last reference does; only unreachable cycles are left to the operating system.
    """
    try:
        main()
    finally:
        gc.freeze()
