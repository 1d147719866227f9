"""The ``cronjobs`` command line: the group, its global options and the entry point.

The commands live by family in ``jobs``, ``runs``, ``ticking`` (tick and worker) and
``admin``; each parses its input, calls one library function and renders the result (with
``render``): no SQL and no clock here. ``app`` holds what they share. A command imports
the library it calls when it runs, so that ``cronjobs tick``, which starts every minute,
loads only what a tick uses.

Exit codes: 0 success; 1 the world failed (database unreachable, internal error);
2 bad input or configuration (nothing was written); 3 ``status --check`` found a problem.
"""

from __future__ import annotations

import gc
import logging
import sys
from typing import NoReturn

import click

from cronjobs import __version__
from cronjobs.cli import admin, jobs, runs, ticking
from cronjobs.cli.app import EXIT_FAILURE, EXIT_OK, App, split_apps
from cronjobs.db.config import resolve_database
from cronjobs.errors import CronjobsError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100,
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
        apps=split_apps(apps),
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
        from cronjobs.db.config import scrub

        return scrub(super().format(record))


for command in (ticking.tick, ticking.worker,
                jobs.define, jobs.list_command, jobs.describe, jobs.pause, jobs.resume,
                jobs.remove, jobs.next_command, jobs.explain, jobs.backfill,
                runs.retry, runs.trigger, runs.cancel, runs.ack, runs.runs, runs.show,
                admin.migrate, admin.status, admin.prune, admin.metrics, admin.embedded):
    main_group.add_command(command)


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
        from cronjobs.db.config import scrub

        click.echo(f"error: {scrub(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        from cronjobs.db.config import scrub

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
