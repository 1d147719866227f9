"""explain's folding, pinned: consecutive entries with the same story become one entry with
a count; runs that need a look never fold."""

from __future__ import annotations

import datetime as dt

from cronjobs.core.explain import Explained, fold
from cronjobs.models import Run

T0 = dt.datetime(2026, 11, 25, 14, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


def _at(i: int) -> dt.datetime:
    return T0 + i * MINUTE


def _run(run_id: int, status: str, trigger: str = "schedule") -> Run:
    slot = _at(run_id)
    return Run(id=run_id, definition_id=1, scheduled_for=slot, trigger=trigger,
               status=status, payload=None, attempt=1, max_attempts=1, exclusive=True,
               eligible_at=slot, lease_owner=None, lease_token=None, lease_expires_at=None,
               heartbeat_at=None, cancel_requested_at=None, started_at=None,
               finished_at=slot, exit_code=None, error=None, output_tail=None, result=None,
               retry_count=0, retried_at=None, retry_of=None, tick_id=None, created_at=slot,
               updated_at=slot, acknowledged_at=None, acknowledged_by=None,
               output_bytes=None, stage="history", retire_at=None)


def _slot(i: int, outcome: str, reason: str | None = None, detail: str | None = None
          ) -> Explained:
    return Explained(_at(i), _at(i), 1, outcome, reason, detail)


def _ran(i: int, status: str) -> Explained:
    return Explained(_at(i), _at(i), 1, status, None, f"{status} (attempt 1 of 1)",
                     _run(i, status))


def test_repeated_outcomes_fold_with_their_count() -> None:
    entries = [_slot(i, "not-a-slot", None, "before the job was defined") for i in range(98)]
    entries += [_slot(98 + i, "skipped", "overlap", f"{i % 3 + 1} run(s) still running")
                for i in range(5)]
    folded = fold(entries)
    assert [(e.first_slot, e.last_slot, e.slot_count, e.outcome, e.reason, e.detail, e.folded)
            for e in folded] == [
        (_at(0), _at(97), 98, "not-a-slot", None, "before the job was defined", True),
        # skips fold by their reason; details that differ are dropped
        (_at(98), _at(102), 5, "skipped", "overlap", None, True)]


def test_succeeded_runs_fold_and_runs_that_need_a_look_do_not() -> None:
    entries = [_ran(1, "succeeded"), _ran(2, "succeeded"), _ran(3, "succeeded"),
               _ran(4, "dead"), _ran(5, "dead"), _ran(6, "succeeded")]
    folded = fold(entries)
    assert [(e.outcome, e.slot_count, e.first_run_id, e.last_run_id, e.detail)
            for e in folded] == [
        ("succeeded", 3, 1, 3, "3 runs succeeded"),
        ("dead", 1, None, None, "dead (attempt 1 of 1)"),
        ("dead", 1, None, None, "dead (attempt 1 of 1)"),
        ("succeeded", 1, None, None, "succeeded (attempt 1 of 1)")]
    assert folded[0].run is None and folded[1].run is not None
    assert not folded[3].folded


def test_a_skip_record_without_a_count_makes_the_fold_uncounted() -> None:
    uncounted = Explained(_at(0), _at(9), None, "skipped", "invalid", "bad zone")
    folded = fold([uncounted, _slot(10, "skipped", "invalid", "bad zone")])
    assert [(e.first_slot, e.last_slot, e.slot_count) for e in folded] == [
        (_at(0), _at(10), None)]


def test_folding_twice_changes_nothing() -> None:
    entries = [_slot(i, "pending", None, "not decided yet") for i in range(10)]
    assert fold(fold(entries)) == fold(entries)


def test_a_manual_run_keeps_a_line_of_its_own() -> None:
    """A run triggered by hand is not a slot: beside the scheduled run of the same minute it
    is a line of its own (the minute twice, one line saying manual), never counted as one of
    a fold's slots."""
    manual = Explained(_at(2) + dt.timedelta(seconds=30), _at(2) + dt.timedelta(seconds=30),
                       1, "succeeded", None, "succeeded (attempt 1 of 1)",
                       _run(9, "succeeded", trigger="manual"))
    folded = fold([_ran(1, "succeeded"), _ran(2, "succeeded"), manual, _ran(3, "succeeded")])
    assert [(e.first_slot, e.slot_count, e.run.id if e.run else None, e.first_run_id,
             e.last_run_id) for e in folded] == [
        (_at(1), 2, None, 1, 2),
        (_at(2) + dt.timedelta(seconds=30), 1, 9, None, None),
        (_at(3), 1, 3, None, None)]
