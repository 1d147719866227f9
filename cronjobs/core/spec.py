"""A job definition's fields, declared once (:data:`FIELDS`), and :func:`build_spec`, which
turns the values a user gave — ``cronjobs define``'s options, a jobs file's keys, the
keywords of ``Client.define`` and ``@cronjobs.job`` — into a DefinitionSpec.

Each :class:`Field` states its name (the Python keyword and the jobs file's key; ``define``'s
option is the same name with dashes: ``max_attempts``, ``--max-attempts``), the
job_definitions columns it sets, what it holds, its default as typed, its bounds or choices,
how it is read and how it is written back, and its help. Built from the table: ``define``'s
options (``cli.options.definition_options``), the jobs file's keys and their types and the
fields apply compares and export writes (``core.declarations``), and a stored job read back
as options (``Field.given``), which ``update_spec`` overlays with what ``define`` was given.
Checked against it by
tests: upsert_definition's column lists, job_definitions' columns, DefinitionSpec's
attributes, and the keyword arguments of ``Client.define`` and ``@cronjobs.job``.

Adding a field: its entry here, its column in schema.sql and in a migration, in
upsert_definition's lists and in DefinitionSpec and Definition; the tests name what is
missing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cronjobs.core.retention import KEEP_LEAST, KEEP_MOST, parse_keep
from cronjobs.cron import check_timezone
from cronjobs.durations import DURATION_HELP, format_duration, parse_bounded
from cronjobs.errors import UsageError
from cronjobs.models import Catchup, DefinitionSpec, Kind, NotifyEvent, Overlap
from cronjobs.validation import (
    MAX_COMMAND_CHARS,
    MAX_NOTIFY_URLS,
    check_name,
    check_notify_url,
    check_text,
    parse_payload,
)

SECOND = dt.timedelta(seconds=1)
DAY = dt.timedelta(days=1)
BACKOFF_CAP = dt.timedelta(hours=1)
NO_VALUE = ("none", "never", "off")
GLOBAL_KEEP = "default"  # a job's --keep-succeeded/--keep-failed: the global retention's

# What a field holds, as a jobs file writes it (its type errors say so), and the type the
# Python API takes for it (Client.define and @cronjobs.job, each keyword also taking None:
# left out).
FORMS: dict[str, str] = {
    "text": "str",
    "integer": "int",
    "boolean": "bool",
    "duration": "str",
    "table": "dict[str, Any] | str",  # the payload: a table, or a JSON object in a string
    "urls": "str | Sequence[str]",
    "events": "str | Sequence[str]",  # or comma-separated, as on the command line
}


@dataclass(frozen=True)
class Field:
    """One field of a job definition: everything the layers that take it need to know."""

    name: str  # the Python keyword and the jobs file's key
    columns: tuple[str, ...]  # the job_definitions columns (DefinitionSpec attributes) it
    # sets: the first is its value as read; the others build_spec works out from it
    form: str  # a key of FORMS
    read: Callable[[Field, Any], Any]  # the value as typed -> the first column's value
    help: str  # define's --help
    default: Any = None  # as typed (None: no value)
    metavar: str | None = None
    enum: type[StrEnum] | None = None  # its values are the choices
    bounds: tuple[Any, Any] | None = None  # the least and the most: integers or durations
    write: Callable[[Any], Any] = lambda value: value  # the column's value as a jobs file
    # writes it (export, and apply's diff)
    argument: bool = False  # define takes it as an argument, not an option (SCHEDULE)
    decorator: bool = True  # @cronjobs.job takes it (not command or handler: it declares
    # the handler it decorates)
    secret: bool = False  # URLs that may hold a token: shown masked

    @property
    def option(self) -> str:
        """``define``'s option: ``--max-attempts``."""
        return "--" + self.name.replace("_", "-")

    @property
    def column(self) -> str:
        return self.columns[0]

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(member.value for member in self.enum) if self.enum is not None else ()

    @property
    def limits(self) -> tuple[Any, Any]:
        if self.bounds is None:
            raise TypeError(f"field {self.name!r} has no bounds")
        return self.bounds

    @property
    def annotation(self) -> str:
        """The type the Python API's keyword takes (with ``| None``: left out)."""
        return f"{FORMS[self.form]} | None"

    def given(self, value: Any) -> Any:
        """A stored value (its first column's) back as the field's option takes it:
        :func:`build_spec` reads it to the same value again."""
        written = self.write(value)
        if self.form == "table":
            return json.dumps(written, ensure_ascii=False, separators=(",", ":"))
        if self.form in ("urls", "events"):
            return tuple(written)
        return written


# -- reading a field's value (the messages name the option; the jobs file's renames it) --------

def _as_typed(field: Field, value: Any) -> Any:
    return value


def _schedule(field: Field, value: str) -> str:
    return " ".join(value.split())  # checked by validate_spec, with the zone and the name


def _zone(field: Field, value: str) -> str:
    check_timezone(value)
    return value


def _payload(field: Field, value: str) -> dict[str, Any]:
    return parse_payload(value)


def _choice(field: Field, value: str) -> StrEnum:
    choices = field.choices
    if field.enum is None:
        raise TypeError(f"field {field.name!r} has no choices")
    if value not in choices:
        raise UsageError(f"invalid {field.option} {value!r}: use {', '.join(choices[:-1])} or "
                         f"{choices[-1]}")
    return field.enum(value)


def _integer(field: Field, value: int | None) -> int | None:
    low, high = field.limits
    if value is not None and not low <= value <= high:
        raise UsageError(f"invalid {field.option} {value}: must be between {low} and {high}")
    return value


def _duration(field: Field, value: str) -> dt.timedelta:
    low, high = field.limits
    return parse_bounded(value, option=field.option, minimum=low, maximum=high)


def _optional(field: Field, value: str) -> dt.timedelta | None:
    """A duration, or none (never, off)."""
    if value.strip().lower() in NO_VALUE:
        return None
    return _duration(field, value)


def _alert(field: Field, command: str | None) -> str | None:
    if command is None:
        return None
    if not command.strip():
        raise UsageError("invalid --alert-command: empty")
    return check_text(command, what="--alert-command", limit=MAX_COMMAND_CHARS)


def _group(field: Field, value: str | None) -> str | None:
    return None if value is None else check_name(value, what="--group")


def _urls(field: Field, value: tuple[str, ...]) -> tuple[str, ...]:
    return notify_urls(value)


def _events(field: Field, value: tuple[str, ...]) -> tuple[NotifyEvent, ...]:
    return notify_events(value)


def _keep(field: Field, value: str) -> dt.timedelta | None:
    return keep(value, field.option)


def _kept(value: dt.timedelta | None) -> str:
    """A job's own retention as written (``30d``), or ``default``: the global one."""
    return GLOBAL_KEEP if value is None else format_duration(value)


FIELDS: tuple[Field, ...] = (
    Field("schedule", ("schedule",), "text", _schedule, argument=True,
          help="The cron schedule (an argument of define: SCHEDULE)."),
    Field("tz", ("timezone",), "text", _zone, default="UTC", metavar="ZONE",
          help="IANA time zone the schedule is read in, e.g. Europe/Berlin."),
    Field("command", ("command", "kind"), "text", _as_typed, metavar="SHELL", decorator=False,
          help="Run this with /bin/sh -c, as cron does."),
    Field("handler", ("handler",), "text", _as_typed, metavar="NAME", decorator=False,
          help="Run the @cronjobs.job handler of this name (default: the job's NAME)."),
    Field("payload", ("payload",), "table", _payload, default="{}", metavar="JSON",
          write=dict, help="A JSON object handed to the job."),
    Field("catchup", ("catchup",), "text", _choice, default="latest", enum=Catchup, write=str,
          help="Missed slots: run the latest one, all of them (up to --catchup-limit), "
               "or none."),
    Field("catchup_limit", ("catchup_limit",), "integer", _integer, default=100,
          bounds=(1, 10000), help="With --catchup all: the most missed slots run at once."),
    Field("starting_deadline", ("starting_deadline",), "duration", _optional, default="none",
          metavar="DURATION", bounds=(SECOND, dt.timedelta(days=366)), write=format_duration,
          help=f"A slot later than this is missed, not run ({DURATION_HELP}, or none)."),
    Field("overlap", ("overlap",), "text", _choice, default="skip", enum=Overlap, write=str,
          help="When the previous run is still running: skip the new slot, queue one, "
               "allow both, or replace the running one."),
    Field("max_attempts", ("max_attempts",), "integer", _integer, default=3, bounds=(1, 100),
          help="Attempts per run, including the first."),
    Field("backoff", ("backoff", "backoff_max"), "duration", _duration, default="30s",
          metavar="DURATION", bounds=(SECOND, DAY), write=format_duration,
          help="Delay before the first retry; doubles each time, with jitter, up to 1h "
               "(or this value, if longer)."),
    Field("timeout", ("timeout",), "duration", _optional, default="1h", metavar="DURATION",
          bounds=(SECOND, dt.timedelta(days=7)), write=format_duration,
          help=f"Kill an attempt that runs longer ({DURATION_HELP}, up to 7d, or none)."),
    Field("lease", ("lease",), "duration", _duration, default="60s", metavar="DURATION",
          bounds=(dt.timedelta(seconds=10), dt.timedelta(hours=1)), write=format_duration,
          help="How long a silent worker keeps a run before another takes it over "
               "(10s to 1h; heartbeats renew it)."),
    Field("alert_command", ("alert_command",), "text", _alert, metavar="SHELL",
          help="Run this (/bin/sh -c) when a run becomes dead, with the run's details in "
               "CRONJOBS_* variables (like systemd's OnFailure=)."),
    Field("alert_on_failure", ("alert_on_failure",), "boolean", _as_typed, default=False,
          help="Also run the alert command on every failed attempt."),
    Field("pause_after_failures", ("pause_after_failures",), "integer", _integer,
          metavar="N", bounds=(1, 1000),
          help="Pause the job after N failed attempts in a row (with a note saying why)."),
    Field("group", ("group_name",), "text", _group, metavar="NAME",
          help="Its runs count against group NAME's limit "
               "(`cronjobs group set NAME --max-running N`)."),
    Field("notify", ("notify_urls",), "urls", _urls, default=(), metavar="URL", write=list,
          secret=True,
          help=f"POST a JSON notification to this http(s) webhook (repeatable, at most "
               f"{MAX_NOTIFY_URLS}; Slack and Mattermost incoming webhooks show its `text`). "
               "A secret: shown masked."),
    Field("notify_on", ("notify_on",), "events", _events, default=(), metavar="EVENTS",
          enum=NotifyEvent, write=lambda events: [str(event) for event in events],
          help="When to notify: dead (a run exhausted its attempts), failure (any failed "
               "attempt), recovery (a success after a failure); repeatable or "
               "comma-separated. Default: dead,recovery."),
    Field("keep_succeeded", ("keep_succeeded",), "duration", _keep, default=GLOBAL_KEEP,
          metavar="DURATION", bounds=(KEEP_LEAST, KEEP_MOST), write=_kept,
          help="Keep its succeeded and cancelled runs this long after they finish "
               "(1d to 3650d, e.g. 30d or 12w), or default: the global retention "
               "(`cronjobs retention`)."),
    Field("keep_failed", ("keep_failed",), "duration", _keep, default=GLOBAL_KEEP,
          metavar="DURATION", bounds=(KEEP_LEAST, KEEP_MOST), write=_kept,
          help="Keep its dead runs this long after they died (1d to 3650d), or default: "
               "the global retention."),
)
BY_NAME: dict[str, Field] = {field.name: field for field in FIELDS}
KEY_COLUMN = "name"  # the job's name: the one column that is no field (NAME names the job)
# The columns of job_definitions that are the job's state, not its definition: what the
# engine and the operators' commands write (a column is either a field's or one of these).
STATE_COLUMNS = frozenset({
    "id", "consecutive_failures", "paused_at", "paused_until", "pause_note", "invalid_reason",
    "removed_at", "source", "cursor_at", "next_due_at", "schedule_since", "created_at",
    "updated_at", "last_succeeded_at", "last_failed_at"})


def spec_columns() -> tuple[str, ...]:
    """The columns a DefinitionSpec sets (its attributes): the name and every field's."""
    return (KEY_COLUMN, *(column for field in FIELDS for column in field.columns))


def build_spec(*, name: str, schedule: str, **given: Any) -> DefinitionSpec:
    """Validate the fields ``given`` (by :data:`FIELDS` name; those left out or given as
    None take their defaults); the first problem raises a UsageError naming the option.

    The one validation of a job's options: ``define``, ``Client.define``, the
    ``@cronjobs.job`` decorator and the jobs file all come here (the CLI's own checks of
    choices and ranges repeat these)."""
    unknown = sorted(set(given) - set(BY_NAME))
    if unknown:
        raise TypeError(f"build_spec() got an unexpected field {unknown[0]!r}")
    check_name(name)
    given["schedule"] = schedule
    typed = {f.name: f.default if given.get(f.name) is None else given[f.name]
             for f in FIELDS}
    if typed["command"] is not None and typed["handler"] is not None:
        raise UsageError("--command and --handler cannot be used together: a job runs either "
                         "a shell command or a Python handler")
    columns = {field.column: field.read(field, typed[field.name]) for field in FIELDS}
    command, backoff = columns["command"], columns["backoff"]
    columns.update(  # the columns worked out from others (Field.columns[1:])
        kind=Kind.COMMAND if command is not None else Kind.HANDLER,
        handler=None if command is not None else (columns["handler"] or name),
        backoff_max=max(BACKOFF_CAP, backoff),
    )
    return DefinitionSpec(name=name, **columns)


def stored_options(job: DefinitionSpec) -> dict[str, Any]:
    """Every field of ``job`` as its option takes it: ``build_spec(name=job.name,
    **stored_options(job))`` is ``job`` again."""
    return {field.name: field.given(getattr(job, field.column)) for field in FIELDS}


# The fields with a default to return to (`define --reset`, a jobs file's key left out):
# not SCHEDULE, and not what the job runs (a new target is given: --command or --handler)
RESETTABLE = tuple(field for field in FIELDS
                   if not field.argument and field.name not in ("command", "handler"))


def reset_fields(values: Iterable[str]) -> tuple[str, ...]:
    """``define --reset OPTION`` (repeatable or comma-separated; ``max-attempts``,
    ``--max-attempts`` or ``max_attempts``): the fields named, or a UsageError."""
    names = [v.strip().lstrip("-").replace("-", "_") for value in values
             for v in value.split(",") if v.strip()]
    known = {field.name for field in RESETTABLE}
    for name in names:
        if name not in known:
            shown = name.replace("_", "-") if len(name) <= 30 else name[:27] + "..."
            raise UsageError(f"invalid --reset {shown!r}: use one of "
                             f"{', '.join(f.option.lstrip('-') for f in RESETTABLE)}")
    return tuple(dict.fromkeys(names))


def update_spec(base: DefinitionSpec, *, schedule: str | None = None,
                reset: Collection[str] = (), replace_target: bool = False,
                **given: Any) -> DefinitionSpec:
    """``base`` (a job that exists) with the fields ``given`` changed (by :data:`FIELDS`
    name), those named in ``reset`` back to their defaults, and every other kept — what
    ``cronjobs define`` does to a job that exists. A new ``schedule`` replaces the old one.

    A change of what the job runs from one kind to the other (``command`` given to a
    handler job, ``handler`` to a command job) is refused with a UsageError unless
    ``replace_target``; a new command for a command job (or handler for a handler job) is
    an ordinary change."""
    unknown = sorted(set(given) - set(BY_NAME))
    if unknown:
        raise TypeError(f"update_spec() got an unexpected field {unknown[0]!r}")
    given = {name: value for name, value in given.items() if value is not None}
    both = [name for name in reset if name in given]
    if both:
        option = BY_NAME[both[0]].option
        raise UsageError(f"--reset {option.lstrip('-')} and {option} cannot be used together")
    kind = base.kind  # both given: build_spec says they exclude each other
    if ("command" in given) != ("handler" in given):
        kind = Kind.COMMAND if "command" in given else Kind.HANDLER
    if kind != base.kind and not replace_target:
        option, then = (("--command", "a shell command") if kind is Kind.COMMAND
                        else ("--handler", "a Python handler"))
        now = f"handler {base.handler!r}" if base.kind is Kind.HANDLER else "a shell command"
        raise UsageError(f"job {base.name!r} runs {now}: {option} would make it run {then} "
                         "instead; add --replace-target to change what it runs")
    options = stored_options(base)
    if kind != base.kind:
        options.update(command=None, handler=None)
    for field in FIELDS:  # a stored value that no longer holds (a zone gone from tzdata)
        if field.name not in given and field.name not in reset and not field.argument:
            try:
                field.read(field, options[field.name])
            except UsageError as exc:
                raise UsageError(f"job {base.name!r}: its stored {field.option} is not valid "
                                 f"({exc.message}); give {field.option} to repair it") from None
    options.update({name: BY_NAME[name].default for name in reset})
    options.update(given)
    options["schedule"] = options["schedule"] if schedule is None else schedule
    return build_spec(name=base.name, **options)


def notify_urls(urls: tuple[str, ...]) -> tuple[str, ...]:
    """--notify URL (repeatable): http(s) only, at most MAX_NOTIFY_URLS, duplicates once."""
    checked = tuple(dict.fromkeys(check_notify_url(url.strip()) for url in urls))
    if len(checked) > MAX_NOTIFY_URLS:
        raise UsageError(f"invalid --notify: at most {MAX_NOTIFY_URLS} URLs per job")
    return checked


def notify_events(values: tuple[str, ...]) -> tuple[NotifyEvent, ...]:
    """--notify-on dead|failure|recovery (repeatable or comma-separated); default dead and
    recovery."""
    names = [v.strip().lower() for value in values for v in value.split(",") if v.strip()]
    if not values:
        return (NotifyEvent.DEAD, NotifyEvent.RECOVERY)
    if not names:
        raise UsageError("invalid --notify-on: empty (use dead, failure or recovery)")
    allowed = [e.value for e in NotifyEvent]
    for name in names:
        if name not in allowed:
            shown = name if len(name) <= 20 else name[:17] + "..."
            raise UsageError(f"invalid --notify-on {shown!r}: use {', '.join(allowed)} "
                             "(repeatable, or comma-separated)")
    return tuple(NotifyEvent(v) for v in allowed if v in names)


def keep(text: str, option: str) -> dt.timedelta | None:
    """A job's own retention (1d to 3650d), or ``default``: the global one (None)."""
    if text.strip().lower() == GLOBAL_KEEP:
        return None
    try:
        return parse_keep(text, option=option)
    except UsageError as exc:
        raise UsageError(f"{exc.message} (or {GLOBAL_KEEP}: the global retention)") from None
