"""The commands of jobs as code: apply (make the database match a jobs file and/or the
modules' decorators, with a diff first) and export (the definitions as a jobs file). Each
parses its input, calls one library function and renders the result."""

from __future__ import annotations

import click

from cronjobs.cli.app import EXIT_PENDING, App, emit, json_option, pass_app
from cronjobs.cli.diff import apply_json, apply_text, export_json, export_toml
from cronjobs.cli.options import Command, crowded_option
from cronjobs.cli.render.common import to_json
from cronjobs.client import apply_declared
from cronjobs.core.apply import export as run_export
from cronjobs.core.crowding import parse_threshold
from cronjobs.errors import UsageError


@click.command(cls=Command)
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--source", metavar="NAME",
              help="The owner recorded on the jobs this applies (default: the file's "
                   "`source`, else file:<file name> and/or app:<modules>).")
@click.option("--dry-run", is_flag=True,
              help="Print the diff and write nothing; exit 4 when changes are pending.")
@click.option("--prune", is_flag=True,
              help="Remove this source's jobs that are no longer declared (history kept).")
@click.option("--adopt", is_flag=True,
              help="Take over declared jobs made by hand or by another source.")
@crowded_option
@json_option
@pass_app
def apply(app: App, file: str | None, source: str | None, dry_run: bool, prune: bool,
          adopt: bool, crowded_threshold: str, as_json: bool) -> None:
    """Make the database match the jobs FILE (TOML) and/or the --app modules' decorators.

    Prints the diff first (+ added, ~ changed with old -> new per field, - removed, the
    unchanged count), then applies it in one transaction: all or nothing. Safe when many
    pods apply at once (they take turns; the result is that of one apply). Bad input exits
    2 naming the file and line or the function, the job and the field. A declared job that
    was made by hand or by another source is refused unless --adopt. Notify URLs are
    secrets: the diff shows them masked (a changed token as "(changed)"), and a masked URL
    (from an export without --show-secrets) is refused. An added or newly timed job that
    lands in a minute already holding more than --crowded-threshold runs of other jobs is
    marked in the diff (! crowded), with what H would give instead: a warning, never an
    error.

    Exit codes: 0 applied or in sync; 4 with --dry-run when changes are pending (a CI check
    that the database is in sync); 2 bad input or a conflict (nothing written).

    \b
    Examples:
      cronjobs apply jobs.toml --dry-run
      cronjobs apply jobs.toml --prune
      cronjobs apply --app myapp.jobs --prune --json
      cronjobs apply jobs.toml --app myapp.jobs --source billing --adopt
    """
    if file is None and not app.apps:
        raise UsageError("nothing to apply: give a jobs FILE and/or --app MODULE")
    threshold = parse_threshold(crowded_threshold)
    result = apply_declared(app.store(), file=file, modules=app.apps, source=source,
                            prune=prune, adopt=adopt, dry_run=dry_run,
                            crowded_threshold=threshold)
    if dry_run:
        emit(apply_json(result), apply_text(result), as_json)
    else:
        app.confirm(apply_json(result), apply_text(result), as_json)
    for diff in (*result.added, *result.changed):
        if diff.warning is not None:
            click.echo(f"warning: {diff.name}: {diff.warning}", err=True)
        if diff.crowding is not None:
            click.echo(f"warning: {diff.name}: {diff.crowding.message}", err=True)
    if dry_run and not result.in_sync:
        raise click.exceptions.Exit(EXIT_PENDING)


@click.command(cls=Command)
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default="toml",
              show_default=True, help="A jobs file (toml) or a JSON document.")
@click.option("--show-secrets", is_flag=True,
              help="Write the notify URLs in full (default: masked, which apply refuses).")
@json_option
@pass_app
def export(app: App, names: tuple[str, ...], fmt: str, show_secrets: bool,
           as_json: bool) -> None:
    """Print jobs NAME... (default: every job) as a jobs file that `apply` reads back.

    Applying the export again changes nothing (the file names the jobs' source when they
    share one; jobs made by hand need `apply --adopt` to be owned by it).

    The notify URLs are secrets (they often hold a token): written masked, with a warning
    on stderr naming the jobs, unless --show-secrets. apply refuses a masked URL, so the
    round trip needs --show-secrets (or the real URLs written back).

    \b
    Examples:
      cronjobs export > jobs.toml
      cronjobs export --show-secrets > jobs.toml
      cronjobs export nightly_cleanup backup --format json
    """
    result = run_export(app.store(), names, show_secrets=show_secrets)
    as_json = as_json or fmt == "json"
    click.echo(to_json(export_json(result)) if as_json else export_toml(result), nl=as_json)
    if result.masked:
        click.echo(f"warning: notify URLs masked (secrets) for job(s) "
                   f"{', '.join(result.masked)}; export with --show-secrets to write them in "
                   "full", err=True)
