"""The ``cronjobs`` command line: the group, its global options and the entry point.

The commands live by family in ``jobs``, ``runs``, ``ticking`` (tick and worker),
``declared`` (apply and export: jobs as code), ``groups`` and ``admin``; each parses its
input, calls one library function and renders the result (with ``render``, or ``diff``
for apply and export): no SQL and no clock here. ``app`` holds what they share. A command
imports the library it calls when it runs, so that ``cronjobs tick``, which starts every
minute, loads only what a tick uses.

Exit codes: 0 success; 1 the world failed (database unreachable, internal error);
2 bad input or configuration (nothing was written); 3 ``status --check`` found a problem;
4 ``apply --dry-run`` found changes pending.
"""

from __future__ import annotations

import gc
import logging
import sys
from typing import NoReturn

import click

from cronjobs import __version__
from cronjobs.cli import admin, declared, groups, jobs, runs, serving, ticking
from cronjobs.cli.app import EXIT_FAILURE, EXIT_OK
from cronjobs.cli.options import Command, Parsing, SubGroup, global_options
from cronjobs.errors import CronjobsError


class _Group(Parsing, click.Group):
    """The cronjobs group: its commands and sub-groups take the global options too."""

    command_class = Command
    group_class = SubGroup


@click.group(cls=_Group, params=global_options(read_env=True),
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100,
                               "auto_envvar_prefix": "CRONJOBS"})
@click.version_option(__version__, "--version", prog_name="cronjobs", allow_from_autoenv=False)
def main_group() -> None:
    """Scheduled jobs kept in PostgreSQL, run by `cronjobs tick` from cron or Kubernetes.

    The options above the commands can also follow one (`cronjobs tick -v`); every option
    can also be set by the environment variable its --help shows.

    Without a configured database, an embedded PostgreSQL is started in
    $CRONJOBS_HOME (default: your user data directory) and left running.

    \b
    Examples:
      cronjobs define nightly_cleanup "0 3 * * *"        # a @cronjobs.job handler
      cronjobs define backup "0 2 * * *" --command "pg_dump mydb > /backups/db.sql"
      cronjobs list
      cronjobs next backup --count 3
    """


for command in (ticking.tick, ticking.worker,
                jobs.define, jobs.list_command, jobs.describe, jobs.pause, jobs.resume,
                jobs.remove, jobs.next_command, jobs.explain, jobs.backfill,
                declared.apply, declared.export, groups.group,
                runs.retry, runs.trigger, runs.cancel, runs.ack, runs.runs, runs.show, runs.logs,
                admin.migrate, admin.status, admin.prune, admin.metrics, admin.embedded,
                serving.serve):
    main_group.add_command(command)


# -- entry point ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; turn cronjobs errors into one clear line and a documented exit code."""
    try:
        code = main_group.main(args=argv, prog_name="cronjobs", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILURE)
    except click.exceptions.NoArgsIsHelpError as exc:  # `cronjobs` alone: the help
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "cronjobs"
        click.echo(f"error: {_one_line(exc.format_message())} (try '{command} --help')",
                   err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
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


def _one_line(message: str) -> str:
    """Click's message as one line in our style: lower case first, no final full stop."""
    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text[:-1] if text.endswith(".") else text


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
