"""The ``cronjobs`` command line: the group, its global options and the entry point.

The commands live by family in ``jobs``, ``runs``, ``ticking`` (tick), ``working``
(worker), ``declared`` (apply and export: jobs as code), ``groups``, ``admin`` and
``serving``; each parses its input, calls one library function and renders the result (with
``render``, or ``diff`` for apply and export): no SQL and no clock here. ``app`` holds what
they share. The group finds a command by its name in :data:`COMMANDS` and imports its
family's module then (see there why).

Exit codes: 0 success; 1 the world failed (database unreachable, internal error);
2 bad input or configuration (nothing was written); 3 ``status --check`` found a problem;
4 ``apply --dry-run`` found changes pending; 130 interrupted by Ctrl-C.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
from collections.abc import Iterator, MutableMapping
from typing import NoReturn

import click

from cronjobs import __version__
from cronjobs.cli.app import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
from cronjobs.cli.options import Command, Parsing, SubGroup, global_options
from cronjobs.db.config import scrub
from cronjobs.errors import CronjobsError, UsageError

# Every command, by name: the module of its family and the command's name there.
#
# The one place the CLI defers imports. `cronjobs tick` starts every minute, and the other
# families import what a tick never uses (prometheus_client for `metrics`, cron-descriptor
# for schedules in words, the client and the jobs-file reader for `apply`). Measured on an
# empty tick against the floor (a process that imports psycopg, connects and runs SELECT 1;
# CPU time, median of 30 alternating runs): importing every family made it 1.51 times the
# floor, over the budget of 1.5; with this table it is 1.31. Each family's module imports
# what it uses at its top, as every other module does.
COMMANDS = {
    "tick": ("ticking", "tick"), "worker": ("working", "worker"),
    "define": ("jobs", "define"), "list": ("jobs", "list_command"),
    "describe": ("jobs", "describe"), "pause": ("jobs", "pause"),
    "resume": ("jobs", "resume"), "remove": ("jobs", "remove"),
    "next": ("jobs", "next_command"), "explain": ("jobs", "explain"),
    "backfill": ("jobs", "backfill"), "forecast": ("forecasting", "forecast"),
    "apply": ("declared", "apply"), "export": ("declared", "export"),
    "group": ("groups", "group"),
    "retry": ("runs", "retry"), "trigger": ("runs", "trigger"), "cancel": ("runs", "cancel"),
    "ack": ("runs", "ack"), "runs": ("runs", "runs"), "show": ("runs", "show"),
    "logs": ("runs", "logs"),
    "migrate": ("admin", "migrate"), "status": ("admin", "status"),
    "retention": ("admin", "retention"),
    "metrics": ("admin", "metrics"),
    "crontab": ("admin", "crontab"), "embedded": ("admin", "embedded"),
    "serve": ("serving", "serve"),
}


# Commands that are gone, and what each says instead: exit 2, one line, nothing written.
GONE = {
    "prune": "`cronjobs prune` is gone: every tick applies the one retention policy, dropping "
             "whole days; set it with `cronjobs retention --succeeded 30d --failed 90d`",
}


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands (click's ``Group.commands``): every name of :data:`COMMANDS`,
    each command imported from its family's module when it is first asked for."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = COMMANDS[name]
            command = getattr(importlib.import_module(f"cronjobs.cli.{module}"), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"cronjobs.cli.{module}.{attribute} is not a command")
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._loaded]))

    def __len__(self) -> int:
        return len(COMMANDS.keys() | self._loaded.keys())


class _Group(Parsing, click.Group):
    """The cronjobs group: its commands and sub-groups take the global options too."""

    command_class = Command
    group_class = SubGroup

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in GONE:
            raise UsageError(GONE[args[0]])
        return super().resolve_command(ctx, args)


@click.group(cls=_Group, commands=_Commands(), params=global_options(read_env=True),
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
        click.echo(f"error: {scrub(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
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

    The interpreter's last collection at exit walks every object the imports created, to
    free memory for a process that is ending. Measured as for :data:`COMMANDS`, an empty
    tick is 1.55 times the floor with that collection and 1.31 without it (the budget is
    1.5). Exit handlers still run (logging is flushed) and an object still goes when its
    last reference does; only unreachable cycles are left to the operating system.
    """
    try:
        main()
    finally:
        gc.freeze()
