"""The schema's version and the migrations' bookkeeping."""

from __future__ import annotations

import datetime as dt

from cronjobs.db.session import Queries
from cronjobs.errors import (
    SchemaNotReady,
)


class SchemaStore(Queries):
    """The schema's version and the migrations' bookkeeping."""

    def session_setting(self, name: str) -> str | None:
        value: str | None = self._values("session_setting", {"name": name})[0]
        return value

    def migrations_table_exists(self) -> bool:
        return bool(self._values("migrations_table_exists")[0])

    def schema_version(self) -> int:
        return int(self._values("schema_version")[0])

    def installed_version(self) -> int | None:
        """The schema version, or None when the database has no cronjobs schema: the check
        on connecting, in one statement. Not inside a transaction (where a missing table
        would abort it); ``migrations_table_exists`` serves there."""
        try:
            return self.schema_version()
        except SchemaNotReady:
            return None

    def lock_migrations(self) -> None:
        self._send("migration_lock")

    def record_migration(self, version: int, name: str) -> None:
        self._send("record_migration", {"version": version, "name": name})


    # -- the upgrade to version 11 (cronjobs/db/upgrade.py) -------------------------------

    def legacy_rows(self) -> int | None:
        """About how many runs the old tables still hold; None once they are gone."""
        value = self._values("legacy_rows")[0]
        return None if value is None else max(int(value), 0)

    def move_legacy_runs(self, *, now: dt.datetime, batch: int) -> int:
        return int(self._values("move_legacy_runs", {"now": now, "batch": batch})[0])

    def drop_legacy(self, *, lock_timeout: dt.timedelta) -> None:
        with self.session.transaction():
            self.session.lock_timeout(lock_timeout)
            self._send("legacy_orphans")
            self._send("drop_legacy")
