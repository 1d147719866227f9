"""Every column of job_definitions is either a field of the spec (``core.spec.FIELDS``, or
the job's name) or the job's state (``core.spec.STATE_COLUMNS``): a column added by a
migration without its field fails here. And a definition read back holds the enums."""

from __future__ import annotations

from typing import Any

import psycopg

from cronjobs.core.definitions import define
from cronjobs.core.spec import STATE_COLUMNS, build_spec, spec_columns
from cronjobs.db.store import Store
from cronjobs.models import Catchup, Kind, NotifyEvent, Overlap


def test_every_column_is_a_field_or_the_jobs_state(db: psycopg.Connection[Any]) -> None:
    columns = {row[0] for row in db.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'job_definitions'")}
    assert set(spec_columns()).isdisjoint(STATE_COLUMNS)
    assert columns - STATE_COLUMNS == set(spec_columns())
    assert columns >= STATE_COLUMNS


def test_a_definition_read_back_holds_its_enums(store: Store) -> None:
    spec = build_spec(name="j", schedule="@daily", command="true", catchup="all",
                      overlap="queue", notify=("https://hooks.example.com/x",),
                      notify_on=("failure", "dead"))
    define(store, spec)
    definition = store.definitions.definition_by_name("j")
    assert definition is not None
    assert (definition.kind, definition.catchup, definition.overlap) == (
        Kind.COMMAND, Catchup.ALL, Overlap.QUEUE)
    assert type(definition.kind) is Kind and type(definition.catchup) is Catchup
    assert type(definition.overlap) is Overlap
    assert definition.notify_on == (NotifyEvent.DEAD, NotifyEvent.FAILURE)
    assert all(type(event) is NotifyEvent for event in definition.notify_on)
