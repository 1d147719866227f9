"""What the commands that act on many runs at once share (`backfill`, `remove` of a job
with waiting runs, `ack --all`): they say what they are about to do first.

On a terminal they print it and ask (the answer defaults to no); ``--yes`` answers yes, so
a script says so. Off a terminal (stdin a pipe, a file, cron) without ``--yes`` they refuse
with one line saying what would have happened, exit 2 and write nothing; so does a person
who answers no (or ends the question with Ctrl-C or Ctrl-D). ``--dry-run`` prints what
would happen and writes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import click

from cronjobs.cli.app import EXIT_USAGE
from cronjobs.errors import UsageError

T = TypeVar("T")


def yes_option(func: Callable[..., T]) -> Callable[..., T]:
    return click.option("-y", "--yes", is_flag=True,
                        help="Go ahead without asking (needed off a terminal: a script "
                             "says yes with it).")(func)


def dry_run_option(func: Callable[..., T]) -> Callable[..., T]:
    return click.option("--dry-run", is_flag=True,
                        help="Print what it would do; write nothing.")(func)


def go_ahead(preview: str, *, yes: bool, question: str, option_hint: str) -> None:
    """Return when the command may go ahead: ``yes``, or a person answered yes to
    ``question`` after reading ``preview`` (one line). Otherwise exit 2, nothing written:
    off a terminal with a one-line error ending in ``option_hint`` (what to add)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{preview}; {option_hint} (no terminal to ask on)")
    click.echo(preview, err=True)
    try:
        agreed = click.confirm(question, default=False, err=True)
    except click.exceptions.Abort:  # Ctrl-C or Ctrl-D at the question: a no
        click.echo("", err=True)
        agreed = False
    if not agreed:
        click.echo("nothing written", err=True)
        raise click.exceptions.Exit(EXIT_USAGE)
