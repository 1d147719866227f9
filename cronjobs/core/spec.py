"""Build a DefinitionSpec from the text a user typed (``cronjobs define`` options)."""

from __future__ import annotations

import datetime as dt

from cronjobs.core.retention import parse_keep
from cronjobs.cron import check_timezone
from cronjobs.durations import parse_bounded
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


def build_spec(
    *,
    name: str,
    schedule: str,
    tz: str = "UTC",
    command: str | None = None,
    handler: str | None = None,
    payload: str = "{}",
    catchup: str = "latest",
    catchup_limit: int = 100,
    starting_deadline: str = "none",
    overlap: str = "skip",
    max_attempts: int = 3,
    backoff: str = "30s",
    timeout: str = "1h",
    lease: str = "60s",
    alert_command: str | None = None,
    alert_on_failure: bool = False,
    pause_after_failures: int | None = None,
    group: str | None = None,
    notify: tuple[str, ...] = (),
    notify_on: tuple[str, ...] = (),
    keep_succeeded: str = GLOBAL_KEEP,
    keep_failed: str = GLOBAL_KEEP,
) -> DefinitionSpec:
    """Validate every option; the first problem raises a UsageError naming the option.

    The one validation of a job's options: ``define``, the ``@cronjobs.job`` decorator and
    the jobs file all come here (the CLI's own checks of choices and ranges repeat these)."""
    check_name(name)
    check_timezone(tz)
    if command is not None and handler is not None:
        raise UsageError("--command and --handler cannot be used together: a job runs either "
                         "a shell command or a Python handler")
    _choice(catchup, "--catchup", Catchup)
    _choice(overlap, "--overlap", Overlap)
    _within(catchup_limit, "--catchup-limit", 1, 10000)
    _within(max_attempts, "--max-attempts", 1, 100)
    if pause_after_failures is not None:
        _within(pause_after_failures, "--pause-after-failures", 1, 1000)
    if group is not None:
        check_name(group, what="--group")
    backoff_value = parse_bounded(backoff, option="--backoff", minimum=SECOND, maximum=DAY)
    return DefinitionSpec(
        name=name,
        schedule=" ".join(schedule.split()),
        timezone=tz,
        kind=Kind.COMMAND if command is not None else Kind.HANDLER,
        handler=None if command is not None else (handler or name),
        command=command,
        payload=parse_payload(payload),
        catchup=Catchup(catchup),
        catchup_limit=catchup_limit,
        starting_deadline=_optional(starting_deadline, "--starting-deadline",
                                    maximum=dt.timedelta(days=366)),
        overlap=Overlap(overlap),
        max_attempts=max_attempts,
        backoff=backoff_value,
        backoff_max=max(BACKOFF_CAP, backoff_value),
        timeout=_optional(timeout, "--timeout", maximum=dt.timedelta(days=7)),
        lease=parse_bounded(lease, option="--lease", minimum=dt.timedelta(seconds=10),
                            maximum=dt.timedelta(hours=1)),
        alert_command=_alert(alert_command),
        alert_on_failure=alert_on_failure,
        pause_after_failures=pause_after_failures,
        group_name=group,
        notify_urls=notify_urls(notify),
        notify_on=notify_events(notify_on),
        keep_succeeded=keep(keep_succeeded, "--keep-succeeded"),
        keep_failed=keep(keep_failed, "--keep-failed"),
    )


def _choice(value: str, option: str, kind: type[Catchup] | type[Overlap]) -> None:
    choices = [member.value for member in kind]
    if value not in choices:
        raise UsageError(f"invalid {option} {value!r}: use {', '.join(choices[:-1])} or "
                         f"{choices[-1]}")


def _within(value: int, option: str, low: int, high: int) -> None:
    if not low <= value <= high:
        raise UsageError(f"invalid {option} {value}: must be between {low} and {high}")


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


def _alert(command: str | None) -> str | None:
    if command is None:
        return None
    if not command.strip():
        raise UsageError("invalid --alert-command: empty")
    return check_text(command, what="--alert-command", limit=MAX_COMMAND_CHARS)


def _optional(text: str, option: str, *, maximum: dt.timedelta) -> dt.timedelta | None:
    if text.strip().lower() in NO_VALUE:
        return None
    return parse_bounded(text, option=option, minimum=SECOND, maximum=maximum)


def keep(text: str, option: str) -> dt.timedelta | None:
    """A job's own retention (1d to 3650d), or ``default``: the global one (None)."""
    if text.strip().lower() == GLOBAL_KEEP:
        return None
    try:
        return parse_keep(text, option=option)
    except UsageError as exc:
        raise UsageError(f"{exc.message} (or {GLOBAL_KEEP}: the global retention)") from None
