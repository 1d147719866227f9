"""The global options (--database-url, --prepared-statements, --app, --connect-timeout,
-v, -q, --utc): accepted before the command and after it (`cronjobs -v tick`, `cronjobs tick -v`),
merged into the :class:`App` a command receives; and every option's environment variable,
shown by its --help."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from cronjobs.cli.app import App, split_apps
from cronjobs.core.spec import FIELDS, Field
from cronjobs.core.thresholds import Thresholds
from cronjobs.db.config import resolve_database, scrub
from cronjobs.durations import parse_bounded, parse_duration, shown


class _EnvDocumented(click.Option):
    """An option whose environment variables ``--help`` shows but click does not read:
    ``resolve_database`` reads those of the database URL and of --prepared-statements (its
    messages name the variable used), and the group reads those of the global options
    repeated on every command."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        return None


_GLOBAL = "cronjobs.global_options"  # ctx.meta key: what each level said, in order


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if param.name is not None:
        ctx.meta.setdefault(_GLOBAL, []).append(
            (param.name, value, ctx.get_parameter_source(param.name)))
    return value


def global_options(*, read_env: bool) -> list[click.Parameter]:
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
        _EnvDocumented(["--prepared-statements"], metavar="auto|on|off",
                       envvar="CRONJOBS_PREPARED_STATEMENTS",
                       help="Whether a tick's claims and finishes, and every statement "
                            "of `cronjobs serve`, run as server-side prepared statements "
                            "(planned once per connection). auto (the default): only on a "
                            "connection of its own to PostgreSQL, never through a "
                            "transaction pooler such as PgBouncer.", **common),
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
        env_option(["-q", "--quiet"], is_flag=True, envvar="CRONJOBS_QUIET",
                   help="Print nothing on success from a command that changes something "
                        "(define, pause, retry, ...): the exit code says it worked. Errors "
                        "and warnings still go to stderr.", **common),
        env_option(["--utc"], is_flag=True, envvar="CRONJOBS_UTC",
                   help="Show times in UTC instead of the local zone ($TZ).", **common),
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


class Parsing(click.Command):
    """What every cronjobs command and group does when it parses its arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _name_envvars(self, ctx)
        takes_schedule = not isinstance(self, click.Group) and any(
            p.name in SCHEDULE_ARGUMENTS for p in self.params)
        if takes_schedule:  # extra words: said below, about the schedule
            ctx.allow_extra_args = True
        try:
            rest = super().parse_args(ctx, args)
        except click.BadParameter as exc:
            _name_what_was_typed(exc, ctx)
            raise
        except click.UsageError as exc:  # click leaves some without the command they are of
            if exc.ctx is None:
                exc.ctx = ctx
            raise
        if takes_schedule and ctx.args:
            raise click.UsageError(_unquoted(ctx), ctx)
        return rest


# The arguments that hold a schedule (define's SCHEDULE, next's NAME|SCHEDULE).
SCHEDULE_ARGUMENTS = ("schedule", "job_or_schedule")
_CRON_WORD = re.compile(r"[0-9*/,\-?LW#HA-Za-z()]+")


def _unquoted(ctx: click.Context) -> str:
    """The message for words after a command's last argument: most often a schedule typed
    without quotes, which the shell split into words (and each * into file names)."""
    given = [str(v) for k, v in ctx.params.items() if k in SCHEDULE_ARGUMENTS]
    words = [*given, *ctx.args]
    command = ctx.command_path
    name = ctx.params.get("name")
    before = f"{command} {name}" if name else command
    if len(words) == 5 and all(_CRON_WORD.fullmatch(w) for w in words):
        example = " ".join(words)
    elif given and " " in given[0].strip():  # the schedule was quoted: the words are others
        extra = shown(" ".join(ctx.args))
        if "command" in ctx.params:
            return (f"unexpected extra argument(s) {extra}: quote an option's value that "
                    "holds spaces, e.g. --command 'echo hello'")
        return f"unexpected extra argument(s) {extra}: {command} takes one schedule"
    else:
        example = "* * * * *"
    return (f"the schedule must be one argument: quote it, e.g. {before} '{example}' (left "
            f"unquoted, the shell splits it into words and turns each * into file names; "
            f"{len(ctx.args)} extra argument(s) given)")


def _name_what_was_typed(exc: click.BadParameter, ctx: click.Context) -> None:
    """A bad value names what the user wrote: the option typed on the command line, or the
    environment variable it came from (click names both whichever it was)."""
    param = exc.param
    if exc.param_hint is not None or not isinstance(param, click.Option) or not param.name:
        return
    opts = " / ".join(f"'{o}'" for o in param.opts)
    if ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
        found = next((v for v in envvars if os.environ.get(v)), None)
        exc.param_hint = f"{opts} (from ${found})" if found else opts
    else:
        exc.param_hint = opts


class Command(Parsing):
    """A cronjobs command: takes the global options after its name too, and builds the
    :class:`App` its callback receives from them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_options(read_env=False))

    def invoke(self, ctx: click.Context) -> Any:
        ctx.obj = _make_app(_global_values(ctx))
        return super().invoke(ctx)


class SubGroup(Parsing, click.Group):
    """A group of commands below ``cronjobs`` (``cronjobs embedded``)."""

    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_options(read_env=False))


def _make_app(values: dict[str, Any]) -> App:
    configure_logging(values["verbose"])
    return App(
        target=resolve_database(values["database_url"],
                                prepared=values["prepared_statements"]),
        apps=split_apps(values["apps"]),
        connect_timeout=parse_duration(values["connect_timeout"], option="--connect-timeout")
        .total_seconds(),
        verbose=values["verbose"],
        quiet=values["quiet"],
        utc=values["utc"],
    )


def configure_logging(verbose: int) -> None:
    """Logs to stderr, passwords masked; only the CLI configures logging."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ScrubbingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


# The ids a record carries in its extras (``extra={"job": ..., "run_id": ...}``), as the
# line shows them at its end: `... run 42 succeeded  job=nightly_cleanup run=42 attempt=1`.
CONTEXT = (("job", "job"), ("run_id", "run"), ("attempt", "attempt"), ("tick_id", "tick"))


class _ScrubbingFormatter(logging.Formatter):
    """Log records, tracebacks included, with every password masked (see config.scrub),
    each ending with the job and run it concerns (:data:`CONTEXT`)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        ids = " ".join(f"{label}={getattr(record, key)}" for key, label in CONTEXT
                       if getattr(record, key, None) is not None)
        text = super().formatMessage(record)
        return f"{text}  {ids}" if ids else text

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


# -- health thresholds (`status --check` and `serve`'s /healthz) ------------------------------

_THRESHOLDS = "cronjobs.thresholds"  # the parameters threshold_options adds

# --per-job's words, as metrics(per_job=...) takes them
PER_JOB = {"auto": None, "on": True, "off": False}


def per_job_option(name: str, envvar: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The option that says whether /metrics writes every job's series in detail."""
    return click.option(
        name, "per_job", type=click.Choice(list(PER_JOB)), default="auto", show_default=True,
        envvar=envvar,
        help="Every job's series in detail (last duration, lateness, runs by status, "
             "retries): `auto` for up to 1,000 jobs. Off, or beyond that, per-job series "
             "are written only for the jobs with a problem (overdue, dead runs nobody "
             "acknowledged; at most 1,000, the most serious first), beside the totals: a "
             "scrape then costs the same with 100,000 jobs.")


def threshold_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The thresholds of what is a problem, as options; the command receives them as one
    :class:`Thresholds` in ``thresholds`` (the same options for `status` and `serve`)."""
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _THRESHOLD_NAMES}
        return command(*args, thresholds=parse_thresholds(**values), **kwargs)

    for option in reversed(_threshold_options()):
        wrapper = option(wrapper)
    return wrapper


_THRESHOLD_NAMES = ("max_tick_age", "max_backlog_age", "max_dead_tuples", "max_xmin_age",
                    "max_retention_lag", "max_lateness")


def _threshold_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    return [
        click.option("--max-tick-age", default="5m", show_default=True, metavar="DURATION",
                     help="A tick older than this is a problem: cron or the CronJob stopped."),
        click.option("--max-backlog-age", default="5m", show_default=True, metavar="DURATION",
                     help="A due run unclaimed for longer than this is a problem."),
        click.option("--max-dead-tuples", type=click.IntRange(1000, 10**10), default=100000,
                     show_default=True, metavar="N",
                     help="A hot table (job_runs_queue, job_attempts_queue) with more dead "
                          "row versions than this is a problem, and so is one with more than "
                          "N/10 and more than 4 times its live rows: vacuum is behind."),
        click.option("--max-xmin-age", default="1h", show_default=True, metavar="DURATION",
                     help="A transaction (or prepared transaction) open longer than this while "
                          "it holds back vacuum is a problem."),
        click.option("--max-retention-lag", default="2d", show_default=True,
                     help="The oldest history partition still there this long after its day "
                          "ended is a problem: the tick's retention is not running."),
        click.option("--max-lateness", default=None, metavar="DURATION",
                     help="Runs starting late are a problem when the p99 of their start "
                          "lateness (started_at - scheduled_for) over the last hour is above "
                          "this, e.g. 30s. Default: not judged."),
    ]


def parse_thresholds(*, max_tick_age: str, max_backlog_age: str, max_dead_tuples: int,
                     max_xmin_age: str, max_retention_lag: str,
                     max_lateness: str | None = None) -> Thresholds:
    minute, month = dt.timedelta(minutes=1), dt.timedelta(days=30)
    return Thresholds(
        max_tick_age=parse_bounded(max_tick_age, option="--max-tick-age", minimum=minute,
                                   maximum=month),
        max_backlog_age=parse_bounded(max_backlog_age, option="--max-backlog-age",
                                      minimum=minute, maximum=month),
        max_dead_tuples=max_dead_tuples,
        max_xmin_age=parse_bounded(max_xmin_age, option="--max-xmin-age",
                                   minimum=dt.timedelta(seconds=1), maximum=month),
        max_retention_lag=parse_bounded(max_retention_lag, option="--max-retention-lag",
                                        minimum=dt.timedelta(hours=1),
                                        maximum=dt.timedelta(days=365)),
        max_lateness=parse_bounded(max_lateness, option="--max-lateness",
                                   minimum=dt.timedelta(seconds=1), maximum=month)
        if max_lateness is not None else None)


def crowded_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--crowded-threshold`` of define and apply (one setting for both)."""
    return click.option(
        "--crowded-threshold", default="auto", show_default=True, metavar="N|auto|off",
        envvar="CRONJOBS_CROWDED_THRESHOLD",
        help="Warn when the job lands in a minute already holding more than N runs of "
             "other jobs (over the next 7 days). auto: what the slowest run mode has "
             "started in 10 s (see `cronjobs forecast`), or 10 without history; off: no "
             "check. Never an error.")(func)


# -- a job's fields (`define`) -----------------------------------------------------------------

_DEFINED = tuple(field for field in FIELDS if not field.argument)


def definition_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """An option for each of a job's fields (``core.spec.FIELDS``, in order; SCHEDULE is an
    argument the command declares itself). The command receives the ones the user gave, on
    the command line or in their environment variables, as ``options`` (field name -> value
    as typed); those left out are not in it: a new job takes their defaults
    (``build_spec``), a job that exists keeps their values (``core.update``)."""
    @functools.wraps(command)
    def given_options(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        values = {field.name: kwargs.pop(field.name) for field in _DEFINED}
        given = {name: value for name, value in values.items()
                 if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT}
        return command(*args, options=given, **kwargs)

    wrapper: Callable[..., Any] = given_options
    for field in reversed(_DEFINED):
        wrapper = _field_option(field)(wrapper)
    return wrapper


def _field_option(field: Field) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A field's option, with its checks of choices and ranges (click's messages)."""
    settings: dict[str, Any] = {"help": field.help, "metavar": field.metavar}
    if field.form == "boolean":
        settings["is_flag"] = True
    elif field.form in ("urls", "events"):
        settings["multiple"] = True
    elif field.enum is not None:
        settings["type"] = click.Choice(field.choices)
    elif field.form == "integer" and field.bounds is not None:
        settings["type"] = click.IntRange(*field.bounds)
    if field.default not in (None, False, ()):
        settings.update(default=field.default, show_default=True)
    return click.option(field.option, field.name, **settings)
