"""One options object from the command line to the executor: the worker hands its ticks
the very object it built (as JSON), every field intact."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from cronjobs.tick import TickOptions

EVERY_FIELD = TickOptions(
    now=dt.datetime(2024, 5, 1, 3, 0, tzinfo=dt.UTC), allow_future=True, dry_run=True,
    worker="host:42", concurrency=8, max_runs=100, max_runtime=30.0, grace=5.0,
    apps=("myapp.jobs", "other"), alert_command="notify-send dead", run_ids=(1, 2),
    handlers_only=True, allowed_commands=("backup *",),
    in_process=True, dashboard_url="https://cron.example.com",
    notify_deadline=dt.timedelta(hours=6))


@pytest.mark.parametrize("options", [TickOptions(), EVERY_FIELD], ids=["defaults", "every"])
def test_the_options_survive_json(options: TickOptions) -> None:
    assert TickOptions.from_json(options.to_json()) == options


def test_the_example_sets_every_field() -> None:
    defaults = TickOptions()
    unchanged = [f.name for f in dataclasses.fields(TickOptions)
                 if getattr(EVERY_FIELD, f.name) == getattr(defaults, f.name)]
    assert unchanged == []


def test_the_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TickOptions().concurrency = 8  # type: ignore[misc]


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="not tick options"):
        TickOptions.from_json('{"concurrency": 2, "bogus": 1}')
