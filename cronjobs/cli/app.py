"""What the commands share: the App object every command gets (where the database is, the
user's modules), output in text or JSON, the exit codes, and the parsers of values many
commands take."""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from cronjobs.cli.render.common import to_json
from cronjobs.db import embedded
from cronjobs.db.config import DatabaseTarget
from cronjobs.db.connect import open_store, worker_name
from cronjobs.db.store import Store
from cronjobs.execution.registry import load_apps
from cronjobs.instants import FORMS, Towards
from cronjobs.timefmt import Times

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNHEALTHY = 3
EXIT_PENDING = 4  # `apply --dry-run`: changes are pending (the database is not in sync)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT) outside a tick or a --watch, as shells report it

TIMES_HELP = "see 'Times and durations' in the docs' schedules reference"


def time_help(what: str, towards: Towards = "past") -> str:
    """The help of an option that takes an instant: what it is, then the forms every such
    option takes, in the same words everywhere (see cronjobs.instants)."""
    return f"{what}: {FORMS[towards]} ({TIMES_HELP})."


class App:
    """What every command shares: where the database is, and the user's modules."""

    def __init__(self, target: DatabaseTarget, apps: tuple[str, ...], connect_timeout: float,
                 verbose: int, quiet: bool = False, utc: bool = False) -> None:
        self.target = target
        self.apps = apps
        self.connect_timeout = connect_timeout
        self.verbose = verbose
        self.quiet = quiet
        self.utc = utc
        self._store: Store | None = None
        self._conninfo: str | None = None

    def store(self) -> Store:
        """Connect on first use (announcing the embedded default once, see
        :func:`announce`). The store reconnects itself after a lost connection (see
        ``open_store``)."""
        if self._store is None:
            connected = open_store(
                self.target,
                retry_for=self.connect_timeout,
                announce=self.announce,
                application_name=self.application_name(),
            )
            self._store, self._conninfo = connected.store, connected.conninfo
            click.get_current_context().call_on_close(connected.store.close)
        return self._store

    def another_store(self) -> Store:
        """A second connection to the database :meth:`store` reached (a worker's claim
        passes, beside the connection that listens), closed with the command."""
        self.store()
        connected = open_store(self.target, retry_for=self.connect_timeout, check=False,
                               application_name=self.application_name())
        click.get_current_context().call_on_close(connected.store.close)
        return connected.store

    def conninfo(self) -> str:
        """The connection string of the database :meth:`store` connected to (unmasked: to
        open more connections, never to print)."""
        self.store()
        assert self._conninfo is not None  # noqa: S101 - set by store()
        return self._conninfo

    def announce(self, text: str) -> None:
        """An informational note (which database is used): see :func:`announce`."""
        if not self.quiet:
            announce(text)

    def times(self, now: dt.datetime | None = None, *, relative: bool = True) -> Times:
        """How this command shows instants: local or --utc, relative to ``now`` if given
        (its zone's abbreviation at ``now`` heads the tables)."""
        return Times.of(utc=self.utc, now=now, relative=relative)

    def confirm(self, data: Any, text: str, as_json: bool) -> None:
        """A command that changed something says so: its short confirmation (1 to 3
        lines), its JSON document with --json, nothing with --quiet."""
        if as_json:
            click.echo(to_json(data))
        elif not self.quiet:
            click.echo(text)

    def application_name(self) -> str:
        """`cronjobs <command> <host>:<pid>`, so that pg_stat_activity names the worker."""
        command = click.get_current_context().info_name or "cronjobs"
        return f"cronjobs {command} {worker_name()}"

    def handlers(self) -> set[str] | None:
        """Registered handler names, or None when no --app module is configured."""
        if not self.apps:
            return None
        return set(load_apps(self.apps))


pass_app = click.make_pass_decorator(App)

ANNOUNCED = "announced"  # in the cronjobs home: the informational note was shown once


def announce(text: str) -> None:
    """Show an informational note once, to a person: only when stderr is a terminal (never
    in a tick's logs or a pipe), and only the first time (a file in the cronjobs home
    remembers it was shown)."""
    if not sys.stderr.isatty():
        return
    marker = embedded.home() / ANNOUNCED
    if marker.exists():
        return
    click.echo(text, err=True)
    with contextlib.suppress(OSError):  # not remembered: shown again next time, no harm
        marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker.touch()


def emit(data: Any, text: str, as_json: bool) -> None:
    click.echo(to_json(data) if as_json else text)


def json_option(func: Callable[..., T]) -> Callable[..., T]:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a JSON document (stable shape: see the docs' JSON "
                             "output reference).")(func)


def split_apps(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Callable[[], bool]]:
    """SIGTERM and SIGINT ask the tick to stop gracefully instead of killing it."""
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield lambda: bool(received)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
