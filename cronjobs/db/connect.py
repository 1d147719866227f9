"""Connecting: the configured server or the embedded default, with bounded retries for
transient failures (by the one retry policy, ``cronjobs.db.retry``)."""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg
from psycopg.conninfo import conninfo_to_dict

from cronjobs.db import embedded, sql
from cronjobs.db.config import DatabaseTarget, mask_conninfo, mask_secrets_in, scrub
from cronjobs.db.migrate import check_schema, migrate
from cronjobs.db.retry import RetryPolicy, retrying
from cronjobs.db.store import Store
from cronjobs.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

class Connected(NamedTuple):
    """An open store and where it leads (safe to print)."""

    store: Store
    where: str
    embedded: bool
    conninfo: str  # unmasked: for reconnecting, never for printing


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# So that cronjobs can never wedge the database: no statement, lock wait or idle
# transaction lasts long. Sent as startup options; a pooler that refuses them (PgBouncer
# without `ignore_startup_parameters = options`) gets a connection without them — set them
# on the role there (see deploy/roles.sql).
SESSION_OPTIONS = ("-c statement_timeout=60s -c lock_timeout=10s "
                   "-c idle_in_transaction_session_timeout=60s")
MIGRATE_OPTIONS = "-c statement_timeout=0 -c lock_timeout=30s"


def connect(
    conninfo: str,
    *,
    retry_for: float = 10.0,
    application_name: str = "cronjobs",
    on_retry: Callable[[str], None] | None = None,
    options: str = SESSION_OPTIONS,
    prepared: str = "auto",
) -> psycopg.Connection[Any]:
    """Open an autocommit connection, retrying transient failures for up to ``retry_for``
    seconds with exponential backoff and jitter. Server-side prepared statements (which
    the executor's pass asks for, see Store._later) are allowed as ``prepared`` says:
    ``on``, ``off``, or ``auto``: only on a connection that provably reaches a
    PostgreSQL session of its own (see :func:`prepared_statements_allowed`), so that it
    works through PgBouncer in transaction pooling mode."""
    attempts = 0
    # The startup options to try, in turn while the server (a pooler) refuses them: ours
    # with a marker for prepared_statements_allowed to look for (auto mode), ours, none.
    marker = secrets.token_hex(8)
    startup_options = [_marked(options, marker), options, ""]
    if prepared != "auto":
        startup_options.pop(0)

    def attempt() -> psycopg.Connection[Any]:
        nonlocal attempts
        attempts += 1
        try:
            return psycopg.connect(
                conninfo,
                autocommit=True,
                prepare_threshold=None,
                application_name=application_name[:63],
                connect_timeout=int(os.environ.get("PGCONNECT_TIMEOUT", "5")),
                options=_merged_options(conninfo, startup_options[0]),
            )
        except psycopg.OperationalError as exc:
            if startup_options[0] and "unsupported startup parameter" in str(exc):
                log.debug("the server (a pooler?) refuses startup options; connecting "
                          "with fewer", extra={"action": "connect"})
                startup_options.pop(0)
                return attempt()
            raise

    def retried(exc: BaseException) -> None:
        if on_retry is not None:
            on_retry(mask_secrets_in(_first_line(exc), conninfo))

    try:
        conn = retrying(attempt, policy=RetryPolicy(within=max(retry_for, 0.0)),
                        on_retry=retried)
        sent = marker if SESSION_MARKER in startup_options[0] else None
        try:
            allowed = prepared_statements_allowed(conn, prepared, sent)
        except BaseException:
            conn.close()
            raise
        if allowed:
            # only the statements executed with prepare=True (Store._later's): psycopg
            # would otherwise prepare any statement after this many executions
            conn.prepare_threshold = 2**31
        return conn
    except psycopg.Error as exc:
        tries = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        raise DatabaseUnavailable(mask_secrets_in(
            f"cannot connect to the database at {mask_conninfo(conninfo)}: "
            f"{_first_line(exc)}{tries}", conninfo)) from None


# The custom setting a connection sets among its startup options in auto mode; never read
# by cronjobs otherwise.
SESSION_MARKER = "cronjobs.session_marker"
_SENT_MARKER = re.compile(rf"-c {re.escape(SESSION_MARKER)}=([0-9a-f]+)")


def _marked(options: str, marker: str) -> str:
    """``options`` and the marker setting (read back by _SENT_MARKER)."""
    return f"{options} -c {SESSION_MARKER}={marker}"


def prepared_statements_allowed(conn: psycopg.Connection[Any], mode: str,
                                marker: str | None) -> bool:
    """Whether ``conn`` may keep server-side prepared statements: ``on`` and ``off`` say
    so; ``auto`` allows them only when the marker sent among the startup options (None:
    the options were refused) is set in the session. A transaction pooler gives each
    transaction any server session, where a statement prepared in another is missing (or
    is another client's of the same name); PgBouncer refuses startup options or, with
    ``ignore_startup_parameters = options``, drops them, and either way the marker is not
    there. A direct connection, the embedded server's included, sees it."""
    if mode != "auto":
        return mode == "on"
    if marker is None:
        return False
    return Store(conn).schema.session_setting(SESSION_MARKER) == marker


def _merged_options(conninfo: str, ours: str) -> str | None:
    """Our session settings first, then the user's own `options` (which win on conflict)."""
    try:
        theirs = str(conninfo_to_dict(conninfo).get("options") or "")
    except psycopg.ProgrammingError:
        theirs = ""
    merged = " ".join(part for part in (ours, theirs) if part)
    return merged or None


def _first_line(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    # libpq prefixes: 'connection to server at "h" (addr), port p failed: reason'
    if "failed: " in text:
        text = text.split("failed: ", 1)[1] or text
    return scrub(text)


def _current(store: Store) -> bool:
    return store.schema.installed_version() == sql.current_version()


def open_store(
    target: DatabaseTarget,
    *,
    retry_for: float = 10.0,
    announce: Callable[[str], None] | None = None,
    check: bool = True,
    application_name: str = "cronjobs",
    options: str = SESSION_OPTIONS,
) -> Connected:
    """Connect to ``target``. The embedded default is started (and migrated) on demand;
    any other database must already be at the current schema when ``check`` is set. The
    store reconnects itself after a lost connection (``store.reconnect()``, which the retry
    policy calls between two attempts): one try each time, the policy deciding whether to
    try again."""
    if target.conninfo is None:
        server = embedded.ensure_running()
        where = server.describe()
        if announce is not None:
            announce(
                f"using embedded PostgreSQL at {where}; "
                "set CRONJOBS_DATABASE_URL to use your own server"
            )
        conninfo = server.conninfo
    else:
        conninfo, where = target.conninfo, target.display

    def connect_once(retry_for: float = 0) -> psycopg.Connection[Any]:
        return connect(conninfo, retry_for=retry_for, application_name=application_name,
                       options=options, prepared=target.prepared)

    store = Store(connect_once(retry_for), connect=connect_once)
    if target.conninfo is None:
        if check and not _current(store):
            migrate(store)
        return Connected(store, where, embedded=True, conninfo=conninfo)
    if check:
        try:
            check_schema(store)
        except Exception:
            store.close()
            raise
    return Connected(store, where, embedded=False, conninfo=conninfo)


def connection_kwargs(conninfo: str, *, application_name: str = "cronjobs",
                      options: str = SESSION_OPTIONS, prepared: str = "off") -> dict[str, Any]:
    """What :func:`connect` passes psycopg besides ``conninfo``, for a pool that opens its
    connections itself (the dashboard's): call it once per connection. ``prepared``
    ``auto`` sends a fresh marker among the startup options, for :func:`prepare_pooled`
    to look for in the session."""
    if prepared == "auto" and options:
        options = _marked(options, secrets.token_hex(8))
    return {"autocommit": True, "prepare_threshold": None,
            "application_name": application_name[:63],
            "connect_timeout": int(os.environ.get("PGCONNECT_TIMEOUT", "5")),
            "options": _merged_options(conninfo, options)}


def startup_options_taken(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``, opened by :func:`connect`, was opened with startup options: false
    when the server (a pooler: PgBouncer without ``ignore_startup_parameters = options``)
    refused them and connect() fell back to none. A pool opening more connections to it
    sends none either (``connection_kwargs(options="")``)."""
    return bool(conn.info.get_parameters().get("options"))


def prepare_pooled(conn: psycopg.Connection[Any], prepared: str) -> None:
    """A pool's ``configure``: on a connection opened with :func:`connection_kwargs`, run
    every statement as a server-side prepared statement (parsed and, once PostgreSQL finds
    its generic plan as good, planned once per connection, not at every request) when
    ``prepared`` allows it, as :func:`prepared_statements_allowed` says, with the marker
    the connection sent."""
    sent = _SENT_MARKER.search(conn.info.get_parameters().get("options", ""))
    if prepared_statements_allowed(conn, prepared, sent.group(1) if sent else None):
        conn.prepare_threshold = 0
