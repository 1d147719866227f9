"""What the runner is given and what a handler hands back, without running anything: the
checks on a Work, the context kept in UTC, a handler's result encoded within its limit.
(The runner with real processes: tests/integration/test_runner.py.)"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from cronjobs.execution.context import JobContext
from cronjobs.execution.processes.handler import encode_result
from cronjobs.execution.runners import Work

CONTEXT = JobContext(run_id=42, job="nightly", attempt=2, payload={"table": "events", "days": 30},
                     scheduled_for=dt.datetime(2024, 5, 1, 3, 0, tzinfo=dt.UTC))


@pytest.mark.parametrize(
    ("options", "message"),
    [({"kind": "script", "command": "true"}, "kind must be"),
     ({"kind": "command"}, "needs a command"),
     ({"kind": "handler"}, "needs a handler"),
     ({"kind": "command", "command": "true", "timeout": 0}, "timeout must be positive"),
     ({"kind": "command", "command": "true", "kill_grace": -1}, "kill_grace"),
     ({"kind": "command", "command": "true", "output_limit": -1}, "must not be negative")],
)
def test_work_is_checked(options: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"command": None, "handler": None, **options}
    with pytest.raises(ValueError, match=message):
        Work(context=CONTEXT, **fields)


def test_context_is_kept_in_utc() -> None:
    paris = dt.timezone(dt.timedelta(hours=2))
    context = JobContext(1, "j", dt.datetime(2024, 5, 1, 5, 0, tzinfo=paris), 1, {})
    assert context.scheduled_for == dt.datetime(2024, 5, 1, 3, 0, tzinfo=dt.UTC)
    assert context.scheduled_for.tzinfo is dt.UTC
    assert context.idempotency_key == "j@2024-05-01T03:00:00+00:00"
    assert JobContext.from_dict(context.to_dict()) == context
    with pytest.raises(ValueError, match="aware"):
        JobContext(1, "j", dt.datetime(2024, 5, 1), 1, {})


def test_encode_result() -> None:
    assert encode_result({"a": [1, "é"]}, 100) == ('{"a":[1,"é"]}'.encode(), None)
    assert encode_result(float("nan"), 100) == (b'{"repr": "nan"}', None)
    assert encode_result("a\x00b", 100) == (b'{"repr": "\'a\\\\x00b\'"}', None)
    data, note = encode_result(set(range(1000)), 40)
    assert note is None and data is not None and len(data) <= 40
    assert json.loads(data)["repr"].startswith("{0, 1, 2")
    assert json.loads(data)["repr"].endswith("...")
    assert encode_result(object(), 5) == (
        None, "the handler's result does not fit in 5 bytes")
