"""The database as the rest of cronjobs sees it: one :class:`Store` per connection, holding a
store per concept (``store.definitions``, ``store.queue``, ...), each in its own module under
``cronjobs/db/stores/`` with the named SQL of its concept. They share one
:class:`~cronjobs.db.session.Session`, so a transaction opened on the Store spans them all,
and a reconnect is seen by all of them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, LiteralString

import psycopg

from cronjobs.db.session import Session
from cronjobs.db.stores.definitions import DefinitionStore
from cronjobs.db.stores.materialise import MaterialiseStore
from cronjobs.db.stores.notifications import NotificationStore
from cronjobs.db.stores.queue import QueueStore
from cronjobs.db.stores.retention import RetentionStore
from cronjobs.db.stores.schema import SchemaStore
from cronjobs.db.stores.ticks import TickStore

if TYPE_CHECKING:
    from cronjobs.db.stores.forecast import ForecastStore
    from cronjobs.db.stores.groups import GroupStore
    from cronjobs.db.stores.reports import ReportStore
    from cronjobs.db.stores.runs import RunStore
    from cronjobs.db.stores.storage import StorageStore


class Store:
    """Typed access to the cronjobs tables over one autocommit connection, by concept.

    Statements run in autocommit mode unless wrapped in ``with store.transaction():``.
    """

    def __init__(self, conn: psycopg.Connection[Any],
                 connect: Callable[[], psycopg.Connection[Any]] | None = None) -> None:
        self.session = Session(conn, connect)
        self.schema = SchemaStore(self.session)
        self.definitions = DefinitionStore(self.session)
        self.ticks = TickStore(self.session)
        self.materialise = MaterialiseStore(self.session)
        self.queue = QueueStore(self.session)
        self.retention = RetentionStore(self.session)
        self.notifications = NotificationStore(self.session)

    # The stores only readers use (status, explain, the lists, forecasts, the dashboard)
    # are built, and their modules imported, on first use: a tick never loads them, nor
    # the report rows they read (cronjobs.reports, whose classes take a tick's start-up
    # 10-20 ms to create; docs/benchmarks.md, the empty tick). The other stores import
    # those rows only in their readers' methods, for the same reason.

    @cached_property
    def runs(self) -> RunStore:
        from cronjobs.db.stores.runs import RunStore  # noqa: PLC0415 - see above
        return RunStore(self.session)

    @cached_property
    def reports(self) -> ReportStore:
        from cronjobs.db.stores.reports import ReportStore  # noqa: PLC0415 - see above
        return ReportStore(self.session)

    @cached_property
    def groups(self) -> GroupStore:
        from cronjobs.db.stores.groups import GroupStore  # noqa: PLC0415 - see above
        return GroupStore(self.session)

    @cached_property
    def storage(self) -> StorageStore:
        from cronjobs.db.stores.storage import StorageStore  # noqa: PLC0415 - see above
        return StorageStore(self.session)

    @cached_property
    def forecast(self) -> ForecastStore:
        from cronjobs.db.stores.forecast import ForecastStore  # noqa: PLC0415 - see above
        return ForecastStore(self.session)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The connection now (a reconnect replaces it)."""
        return self.session.conn

    @contextmanager
    def transaction(self, *, rollback: bool = False) -> Iterator[None]:
        """A transaction over every concept (a savepoint when nested); ``rollback`` undoes
        it in any case."""
        with self.session.transaction(rollback=rollback):
            yield

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """See :meth:`Session.pipeline`."""
        with self.session.pipeline():
            yield

    def now(self) -> dt.datetime:
        """The database's clock."""
        return self.session.now()

    def reconnect(self) -> bool:
        """A fresh connection in place of a broken one (see :meth:`Session.reconnect`)."""
        return self.session.reconnect()

    def run_script(self, script: LiteralString) -> None:
        self.session.run_script(script)

    def close(self) -> None:
        self.session.close()
