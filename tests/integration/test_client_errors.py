"""The client's errors are worded for Python (``force=True``, ``limit=0``, ``Client.jobs()``)
while the command line's keep naming its options: the same error carries both wordings
(CronjobsError.for_python), and a refusal writes nothing either way."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from conftest import Invoke, snapshot
from cronjobs import Client, CronjobsError, Refused, RunNotFound, UsageError


@pytest.fixture
def client(database_url: str) -> Iterator[Client]:
    with Client(database_url) as c:
        yield c


def _raises(call: Callable[[], Any]) -> CronjobsError:
    with pytest.raises(CronjobsError) as caught:
        call()
    return caught.value


def test_refusals_and_bad_input_are_worded_for_python(client: Client, cli: Invoke,
                                                      db: psycopg.Connection[Any]) -> None:
    client.define("report", "0 0 1 1 *", command="true")
    queued = client.trigger("report")
    db.execute("UPDATE job_runs SET status = 'succeeded', finished_at = now()")
    past = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    before = snapshot(db)
    cases: list[tuple[Callable[[], Any], type[CronjobsError], str]] = [
        (lambda: client.retry(queued.id), Refused,
         f"run {queued.id} of 'report' succeeded; pass force=True to run its slot again as "
         "a new run"),
        (lambda: client.retry(queued.id, attempts=0), UsageError,
         "invalid attempts=0: must be between 1 and 100"),
        (lambda: client.ack(queued.id), Refused,
         f"run {queued.id} of 'report' succeeded: only a dead run can be acknowledged "
         "(see Client.runs(states=['dead']))"),
        (lambda: client.run(999), RunNotFound, "no run with id 999 (see Client.runs())"),
        (lambda: client.cancel(999), RunNotFound, "no run with id 999 (see Client.runs())"),
        (lambda: client.job("ghost"), UsageError, "no job named 'ghost' (see Client.jobs())"),
        (lambda: client.runs("ghost"), UsageError,
         "no job named 'ghost', now or before (see Client.jobs())"),
        (lambda: client.runs(limit=0), UsageError,
         "invalid limit=0: must be between 1 and 10000"),
        (lambda: client.runs(states=["lost"]), UsageError,
         "invalid state 'lost': must be one of scheduled, queued, running, failed, "
         "succeeded, dead, cancelled"),
        (lambda: client.next_fire_times("report", count=0), UsageError,
         "invalid count=0: must be between 1 and 1000"),
        (lambda: client.pause("report", until=past), UsageError,
         "invalid until=2020-01-01T00:00:00+00:00: it is already past"),
        (lambda: client.pause("report", note="a\x00b"), UsageError,
         "invalid note: contains a NUL character"),
        (lambda: client.trigger("report", at=past), UsageError,
         "invalid at=2020-01-01T00:00:00+00:00: it is already past (trigger without at "
         "runs it now)"),
        (lambda: client.trigger("report", at=past, after=dt.timedelta(hours=1)), UsageError,
         "at and after cannot be used together: give the time or the delay"),
        (lambda: client.trigger("report", after=dt.timedelta(hours=1), force=True),
         UsageError, "force=True cannot be used with at or after: a run for later meets "
         "the job's overlap policy when it becomes due"),
    ]
    for call, kind, message in cases:
        error = _raises(call)
        assert isinstance(error, kind), (message, error)
        assert error.message == message
        assert "--" not in error.message and "`cronjobs" not in error.message
        assert error.__suppress_context__  # the command line's wording is not chained
    assert snapshot(db) == before
    # the command line keeps its own wording of the same errors
    again = cli("retry", str(queued.id))
    assert again.exit_code == 2
    assert "use --force to run its slot again" in again.stderr
    assert "no job named 'ghost' (see `cronjobs list`)" in cli("describe", "ghost").stderr


def test_a_busy_job_is_refused_until_force(client: Client) -> None:
    client.define("report", "0 0 1 1 *", command="true")
    first = client.trigger("report")
    error = _raises(lambda: client.trigger("report"))
    assert isinstance(error, Refused)
    assert error.message == ("'report' has 0 running and 1 waiting run(s) and its overlap "
                             "policy is 'skip': pass force=True to run it anyway")
    forced = client.trigger("report", force=True)
    assert (forced.state, forced.id > first.id) == ("queued", True)
    assert [r.id for r in client.runs("report")] == [forced.id, first.id]
    assert json.dumps([r.state for r in client.runs("report")]) == '["queued", "queued"]'
