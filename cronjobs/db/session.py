"""The small base every store stands on: one autocommit connection (a :class:`Session`) that
runs named SQL (``cronjobs.db.sql``), translates psycopg's errors into the cronjobs error
tree, sends a transaction in one round trip, and reconnects itself when asked to.

Nothing above ``cronjobs.db`` sees psycopg's exceptions: they are translated here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus
from psycopg.rows import RowFactory, class_row, tuple_row

from cronjobs.db import sql
from cronjobs.db.config import scrub
from cronjobs.errors import (
    Conflict,
    CronjobsError,
    CursorMovedBack,
    DatabaseUnavailable,
    InvalidDefinition,
    LockBusy,
    SchemaNotReady,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
# The SQLSTATE of cronjobs_cursor_never_back() (schema.sql): a job's cursor would move back.
CURSOR_MOVED_BACK = "CJ001"


class Session:
    """One autocommit connection and the ways to run named SQL on it.

    Statements run in autocommit mode unless wrapped in ``with session.transaction():``.
    ``connect``, when given, opens a fresh connection: :meth:`reconnect` swaps it in for a
    broken one, so that every store on this session follows without being told.
    """

    def __init__(self, conn: psycopg.Connection[Any],
                 connect: Callable[[], psycopg.Connection[Any]] | None = None) -> None:
        self.conn = conn
        self._connect = connect

    # -- the connection -----------------------------------------------------------------

    def reconnect(self) -> bool:
        """Replace the connection with a fresh one (one try: the retry policy tries again);
        whether it was replaced. Without a way to connect, nothing happens."""
        if self._connect is None:
            return False
        try:
            fresh = self._connect()
        except DatabaseUnavailable:
            return False
        with contextlib.suppress(Exception):
            self.conn.close()
        self.conn = fresh
        return True

    def close(self) -> None:
        self.conn.close()

    def prepares(self) -> bool:
        """Whether this connection runs statements asked to be prepared as prepared
        statements (connect.py decides)."""
        return self.conn.prepare_threshold is not None

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, rollback: bool = False) -> Iterator[None]:
        """A transaction (a savepoint when nested); ``rollback`` undoes it in any case."""
        with translated(), self.conn.transaction(force_rollback=rollback):
            yield

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Statements run inside go to the server without waiting for their answers (the
        server runs them in order, in the same transaction), so that the caller can work
        meanwhile; the block ends when every answer is in. An error surfaces at the latest
        there."""
        with translated(), self.conn.pipeline():
            yield

    @contextmanager
    def transaction_at_once(self) -> Iterator[None]:
        """A transaction whose statements go out together and are answered together: BEGIN,
        what the block sends, COMMIT and one Sync, so one round trip. (psycopg's
        transaction() inside a pipeline waits for the server at its start and at its end:
        three round trips more, most of a short pass's cost.) Any error undoes it. Inside
        a transaction already (a caller's), a savepoint as transaction() makes."""
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            with self.conn.pipeline(), self.conn.transaction():
                yield
            return
        try:
            with self.conn.pipeline():
                self.send("begin")
                yield
                self.send("commit")
        except BaseException:
            # (an error skipped the rest, COMMIT included, up to the Sync: the transaction
            # is open and failed)
            if self.conn.info.transaction_status in (TransactionStatus.INTRANS,
                                                     TransactionStatus.INERROR):
                with contextlib.suppress(psycopg.Error):
                    self.conn.rollback()
            raise

    # -- running named statements -------------------------------------------------------

    def rows(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> list[T]:
        """The rows of a named query, each a frozen dataclass whose fields are the
        query's columns (psycopg's ``class_row``)."""
        with translated(), self.conn.cursor(row_factory=class_row(cls)) as cur:
            cur.execute(sql.query(name), params)
            return cur.fetchall()

    def values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """The first column of every row of a one-column query."""
        with translated(), self.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(sql.query(name), params)
            return [row[0] for row in cur.fetchall()] if cur.description is not None else []

    def count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        """The number of rows a statement changed."""
        with translated(), self.conn.cursor() as cur:
            cur.execute(sql.query(name), params)
            return cur.rowcount

    def send(self, name: str, params: Mapping[str, Any] | None = None, *,
             prepare: bool = False) -> None:
        """Run a statement whose answer is only whether it worked (``prepare``: see
        :meth:`later`)."""
        with translated(), self.conn.cursor() as cur:
            cur.execute(sql.query(name), params, prepare=prepare)

    def later(self, name: str, params: Mapping[str, Any], row_factory: RowFactory[T],
              *, binary: bool = False, prepare: bool = False) -> Callable[[], list[T]]:
        """The rows of a statement sent now, read by calling the result: inside
        ``pipeline()``, after the block, so that nothing waits for them before.
        ``binary``: rows in binary, cheaper than text for the thousands of rows of a
        materialising tick.

        ``prepare``: run it as a server-side prepared statement, planned once per
        connection instead of at every execution, when the connection allows them (see
        connect.py: never through a transaction pooler). Only the executor's pass asks for
        it, for the statements it runs hundreds of times a tick, each time after
        claim_plan's settings: a plan the server caches is made under them (the cache
        does not plan again when settings change, so a statement also run elsewhere is
        prepared only here)."""
        with translated():
            cur = self.conn.cursor(row_factory=row_factory, binary=binary)
            cur.execute(sql.query(name), params, prepare=prepare)

        def rows() -> list[T]:
            with translated(), cur:
                return cur.fetchall()

        return rows

    def run_script(self, script: LiteralString) -> None:
        """Run a multi-statement SQL script (schema or migration) as it is."""
        with translated():
            self.conn.execute(script)

    # -- the clock ----------------------------------------------------------------------

    def lock_timeout(self, timeout: dt.timedelta) -> None:
        """In a transaction: its statements wait ``timeout`` at most for a lock, then fail
        (LockBusy)."""
        self.send("lock_timeout", {"timeout": f"{int(timeout.total_seconds() * 1000)}ms"})

    @contextmanager
    def generic_plans(self) -> Iterator[None]:
        """A transaction whose prepared statements run their generic plan (see
        generic_plans in queries/session.sql); on a connection that prepares none, the
        statements inside run as they would without it (no transaction: it would scope
        nothing)."""
        if not self.prepares():
            yield
            return
        with self.transaction():
            self.send("generic_plans")
            yield

    def now(self) -> dt.datetime:
        """The database's clock: the truth every decision is made against."""
        value: dt.datetime = self.values("now")[0]
        return value.astimezone(dt.UTC)


class Queries:
    """The base of a store of one concept: its typed methods run named SQL on the shared
    :class:`Session` through these helpers."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def conn(self) -> psycopg.Connection[Any]:
        return self.session.conn

    def _rows(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> list[T]:
        return self.session.rows(name, params, cls)

    def _row(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> T | None:
        rows = self.session.rows(name, params, cls)
        return rows[0] if rows else None

    def _one(self, name: str, params: Mapping[str, Any] | None, cls: type[T]) -> T:
        """The row a query always returns."""
        row = self._row(name, params, cls)
        if row is None:
            raise CronjobsError(f"query {name!r} returned no row")
        return row

    def _values(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return self.session.values(name, params)

    def _count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        return self.session.count(name, params)

    def _send(self, name: str, params: Mapping[str, Any] | None = None, *,
              prepare: bool = False) -> None:
        self.session.send(name, params, prepare=prepare)

    def _later(self, name: str, params: Mapping[str, Any], row_factory: RowFactory[T],
               *, binary: bool = False, prepare: bool = False) -> Callable[[], list[T]]:
        return self.session.later(name, params, row_factory, binary=binary, prepare=prepare)

    def _binary(self, name: str, params: Mapping[str, Any], row_factory: RowFactory[T]
                ) -> list[T]:
        return self.session.later(name, params, row_factory, binary=True)()


@contextmanager
def translated() -> Iterator[None]:
    """Translate psycopg errors into the cronjobs error tree."""
    try:
        yield
    except CronjobsError:
        raise
    except pgerrors.UndefinedTable as exc:
        raise SchemaNotReady(_first_line(exc), advice=": run `cronjobs migrate`") from exc
    except pgerrors.UniqueViolation as exc:
        raise Conflict(f"conflict: {_first_line(exc)}") from exc
    except pgerrors.IntegrityError as exc:
        raise InvalidDefinition(f"rejected by the database: {_first_line(exc)}") from exc
    except pgerrors.LockNotAvailable as exc:
        raise LockBusy(f"lock busy: {_first_line(exc)}") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"database error: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        if exc.sqlstate == CURSOR_MOVED_BACK:
            raise CursorMovedBack(f"refused by the database: {_first_line(exc)}") from exc
        raise CronjobsError(f"database error: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return scrub(text[0]) if text else type(exc).__name__
