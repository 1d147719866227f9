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
from click.core import ParameterSource

from cronjobs import __version__
from cronjobs.config import DatabaseTarget, resolve_database
from cronjobs.errors import CronjobsError, UsageError

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNHEALTHY = 3

DURATION_HELP = "a duration such as 90s, 5m, 2h, 1d or 1h30m"


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


class _EnvDocumented(click.Option):
    """An option whose environment variables ``--help`` shows but click does not read:
    ``resolve_database`` reads the database URL's (its messages name the variable used),
    and the group reads those of the global options repeated on every command."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        return None


_GLOBAL = "cronjobs.global_options"  # ctx.meta key: what each level said, in order


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if param.name is not None:
        ctx.meta.setdefault(_GLOBAL, []).append(
            (param.name, value, ctx.get_parameter_source(param.name)))
    return value


def _global_options(*, read_env: bool) -> list[click.Parameter]:
    """The options every command takes, before its name or after it (`cronjobs -v tick`,
    `cronjobs tick -v`). Only the top level reads their environment variables."""
    env_option = click.Option if read_env else _EnvDocumented
    common: dict[str, Any] = {"expose_value": False, "callback": _remember}
    return [
        _EnvDocumented(["--database-url"], metavar="URL",
                       envvar=["CRONJOBS_DATABASE_URL", "DATABASE_URL"],
                       help="PostgreSQL URL or conninfo. Default: the environment variables "
                            "shown, then libpq's PG* variables (if PGHOST or PGDATABASE is "
                            "set), then the embedded server.", **common),
        env_option(["--app", "apps"], metavar="MODULE", multiple=True, envvar="CRONJOBS_APP",
                   help="Python module(s) registering handlers with @cronjobs.job, imported "
                        "from the current directory first (repeatable or comma-separated).",
                   **common),
        env_option(["--connect-timeout"], default="10s", show_default=True, metavar="DURATION",
                   envvar="CRONJOBS_CONNECT_TIMEOUT",
                   help="How long to keep retrying a database that cannot be reached.",
                   **common),
        env_option(["-v", "--verbose"], count=True, envvar="CRONJOBS_VERBOSE",
                   help="Log more (repeat for debug).", **common),
    ]


def _global_values(ctx: click.Context) -> dict[str, Any]:
    """The global options given at every level of ``ctx``, merged: a value typed on the
    command line overrides the environment and the defaults; typed at several levels,
    ``--app`` modules add up, ``-v`` counts add up, and the last of the others wins."""
    merged: dict[str, Any] = {}
    typed: set[str] = set()
    for name, value, source in ctx.meta.get(_GLOBAL, []):
        if name not in merged:
            merged[name] = value
        elif source is not ParameterSource.COMMANDLINE:
            continue
        elif name in typed and name in ("apps", "verbose"):
            merged[name] = merged[name] + value
        else:
            merged[name] = value
        if source is ParameterSource.COMMANDLINE:
            typed.add(name)
    return merged


def _name_envvars(command: click.Command, ctx: click.Context) -> None:
    """Every option of ``command`` can be set by an environment variable, shown in its
    --help: the one it names, or ``CRONJOBS_<COMMAND>_<OPTION>`` after the option as the
    user types it (``CRONJOBS_DEFINE_TZ``, ``CRONJOBS_RUNS_JSON``), not after click's name
    for its parameter (``as_json``)."""
    prefix = ctx.auto_envvar_prefix
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        param.show_envvar = True
        if param.envvar is None and param.allow_from_autoenv and prefix is not None:
            flag = max(param.opts, key=len).lstrip("-").replace("-", "_").upper()
            param.envvar = f"{prefix}_{flag}"
            param.allow_from_autoenv = False


class _Parsing(click.Command):
    """What every cronjobs command and group does when it parses its arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _name_envvars(self, ctx)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:  # click leaves some without the command they are of
            if exc.ctx is None:
                exc.ctx = ctx
            raise


class _Command(_Parsing):
    """A cronjobs command: takes the global options after its name too, and builds the
    :class:`App` its callback receives from them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_global_options(read_env=False))

    def invoke(self, ctx: click.Context) -> Any:
        ctx.obj = _make_app(_global_values(ctx))
        return super().invoke(ctx)


class _SubGroup(_Parsing, click.Group):
    """A group of commands below ``cronjobs`` (``cronjobs embedded``)."""

    command_class = _Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_global_options(read_env=False))


class _Group(_Parsing, click.Group):
    """The cronjobs group: loads ``cronjobs.commands`` when a command it does not hold yet
    is asked for, or when the commands are listed (``--help``)."""

    command_class = _Command
    group_class = _SubGroup

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            _load_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _load_commands()
        return super().list_commands(ctx)


def _load_commands() -> None:
    import cronjobs.commands  # noqa: F401 - its commands register on main_group


def parse_instant(value: str, *, option: str, zone: dt.tzinfo = dt.UTC) -> dt.datetime:
    """ISO-8601; without an offset the time is read in ``zone`` (UTC unless --tz says)."""
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"invalid {option} {value!r}: use ISO-8601, such as 2026-03-29T02:30:00+01:00 "
            "or 2026-03-29T01:30:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
    return parsed.astimezone(dt.UTC)


@click.group(cls=_Group, params=_global_options(read_env=True),
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


def _make_app(values: dict[str, Any]) -> App:
    from cronjobs.durations import parse_duration

    _configure_logging(values["verbose"])
    return App(
        target=resolve_database(values["database_url"]),
        apps=_split_apps(values["apps"]),
        connect_timeout=parse_duration(values["connect_timeout"], option="--connect-timeout")
        .total_seconds(),
        verbose=values["verbose"],
    )


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# -- the tick ---------------------------------------------------------------------------------

@main_group.command()
@click.option("--now", "now", metavar="ISO-8601",
              help="Tick as if the database clock said this (tests, what-if runs). Leases "
                   "still use the database clock.")
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
              help="Alert command for jobs that have none of their own.")
@click.option("--retention", metavar="DURATION", envvar="CRONJOBS_RETENTION",
              help="Prune a little finished history older than this on every tick, e.g. "
                   "30d.")
@click.option("--handlers-only", is_flag=True, envvar="CRONJOBS_HANDLERS_ONLY",
              help="Refuse shell-command jobs: only registered Python handlers run. Whoever "
                   "can write job_definitions can otherwise run commands as this worker's OS "
                   "user.")
@click.option("--allow-command", "allowed_commands", metavar="GLOB", multiple=True,
              envvar="CRONJOBS_ALLOW_COMMANDS",
              help="Only run shell commands matching one of these globs (repeatable; "
                   "space-separated in the environment variable).")
@click.option("--in-process", is_flag=True, envvar="CRONJOBS_IN_PROCESS",
              help="Run Python handlers in threads of the tick instead of a fresh "
                   "interpreter per run: tens of times faster, "
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

    \b
    Examples:
      cronjobs tick --dry-run                 # what is due now; writes nothing
      cronjobs tick -v --app myapp.jobs       # a crontab line: * * * * * cronjobs tick …
      cronjobs tick --concurrency 8 --retention 30d --json
    """
    from cronjobs.db import worker_name
    from cronjobs.durations import parse_bounded
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

    \b
    Examples:
      cronjobs worker --app myapp.jobs --concurrency 8
      CRONJOBS_DATABASE_URL=postgresql://cron@db/app cronjobs worker --handlers-only
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
        click.echo(f"error: {exc.message}", err=True)
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
