"""Bring a database to the current schema, safely when many pods do it at once."""

from __future__ import annotations

import logging
from typing import NamedTuple

from cronjobs.db import sql
from cronjobs.db.store import Store
from cronjobs.errors import SchemaNotReady

log = logging.getLogger(__name__)


class MigrationReport(NamedTuple):
    from_version: int
    to_version: int
    applied: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.from_version != self.to_version


def migrate(store: Store) -> MigrationReport:
    """Apply ``schema.sql`` to an empty database, or the missing numbered migrations to an
    older one, in one transaction under an advisory lock. Idempotent. (An upgrade from
    before version 11 has an online part after this: cronjobs.core.upgrade.)"""
    target = sql.current_version()
    with store.transaction():
        store.schema.lock_migrations()
        if not store.schema.migrations_table_exists():
            store.run_script(sql.schema())
            log.info("schema created", extra={"action": "migrate", "version": target})
            return MigrationReport(0, target, ("schema.sql",))
        current = store.schema.schema_version()
        _refuse_newer(current, target)
        applied = []
        for migration in sql.migrations()[current:]:
            store.run_script(migration.sql)
            store.schema.record_migration(migration.version, migration.name)
            applied.append(f"{migration.version:04d}_{migration.name}")
            log.info("migration applied", extra={"action": "migrate", "version": migration.version})
        return MigrationReport(current, target, tuple(applied))


def check_schema(store: Store) -> int:
    """Fail with a clear message unless the database is at the current schema version."""
    target = sql.current_version()
    current = store.schema.installed_version()
    if current is None:
        raise SchemaNotReady("the database has no cronjobs schema",
                             advice=": run `cronjobs migrate` (or apply schema.sql with psql) "
                                    "first")
    _refuse_newer(current, target)
    if current < target:
        raise SchemaNotReady(
            f"the database schema is at version {current}, this cronjobs needs version "
            f"{target}", advice=": run `cronjobs migrate`"
        )
    return current


def _refuse_newer(current: int, target: int) -> None:
    if current > target:
        raise SchemaNotReady(
            f"the database schema is at version {current}, newer than this cronjobs "
            f"understands ({target})", advice=": upgrade cronjobs"
        )
