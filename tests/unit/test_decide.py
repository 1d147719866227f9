"""The materialisation decision, pure: a definition and an instant in, runs and skips out."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from cronjobs.core.materialise import decide
from cronjobs.models import DueDefinition


def u(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def definition(**changes: Any) -> DueDefinition:
    base = DueDefinition(
        id=1, name="job", schedule="0 * * * *", timezone="UTC", catchup="latest",
        catchup_limit=100, starting_deadline=None, overlap="skip", max_attempts=3,
        paused_at=None, paused_until=None, pause_note=None,
        cursor_at=u("2026-01-01T00:00:00"), next_due_at=u("2026-01-01T01:00:00"),
    )
    return dataclasses.replace(base, **changes)


def skips(decision: Any) -> list[tuple[str, str, int | None, str]]:
    return [(s.first_slot.isoformat()[11:16], s.last_slot.isoformat()[11:16], s.slot_count,
             s.reason.value) for s in decision.skips]


def test_on_time_slot_runs() -> None:
    dec = decide(definition(), u("2026-01-01T01:00:07"))
    assert dec.runs == (u("2026-01-01T01:00:00"),)
    assert dec.skips == ()
    assert dec.advance.cursor_at == u("2026-01-01T01:00:07")
    assert dec.advance.next_due_at == u("2026-01-01T02:00:00")


def test_a_tick_at_59_seconds_still_runs_the_slot() -> None:
    d = definition(schedule="* * * * *", cursor_at=u("2025-12-31T23:59:01"))
    dec = decide(d, u("2026-01-01T00:00:59.9"))
    assert dec.runs == (u("2026-01-01T00:00:00"),)


def test_nothing_due() -> None:
    dec = decide(definition(), u("2026-01-01T00:59:59"))
    assert dec.runs == () and dec.skips == ()
    assert dec.advance.cursor_at == u("2026-01-01T00:00:00")


def test_clock_backwards_decides_nothing_twice() -> None:
    d = definition(cursor_at=u("2026-01-01T05:00:30"), next_due_at=u("2026-01-01T06:00:00"))
    dec = decide(d, u("2026-01-01T03:00:00"))
    assert dec.runs == () and dec.skips == ()
    assert dec.advance.cursor_at == u("2026-01-01T05:00:30")


def test_catchup_latest_coalesces_the_rest() -> None:
    dec = decide(definition(), u("2026-01-01T05:30:00"))
    assert dec.runs == (u("2026-01-01T05:00:00"),)
    assert skips(dec) == [("01:00", "04:00", 4, "coalesced")]


def test_catchup_all_runs_every_missed_slot() -> None:
    dec = decide(definition(catchup="all"), u("2026-01-01T05:30:00"))
    assert [r.hour for r in dec.runs] == [1, 2, 3, 4, 5]
    assert dec.skips == ()


def test_catchup_all_is_bounded_by_its_limit() -> None:
    dec = decide(definition(catchup="all", catchup_limit=2), u("2026-01-01T05:30:00"))
    assert [r.hour for r in dec.runs] == [4, 5]
    assert skips(dec) == [("01:00", "03:00", 3, "catchup_limit")]


def test_catchup_none_runs_only_an_on_time_slot() -> None:
    late = decide(definition(catchup="none"), u("2026-01-01T05:30:00"))
    assert late.runs == ()
    assert skips(late) == [("01:00", "05:00", 5, "catchup_none")]
    on_time = decide(definition(catchup="none", cursor_at=u("2026-01-01T04:00:10")),
                     u("2026-01-01T05:00:20"))
    assert on_time.runs == (u("2026-01-01T05:00:00"),)


def test_starting_deadline_misses_late_slots() -> None:
    d = definition(starting_deadline=dt.timedelta(minutes=10))
    dec = decide(d, u("2026-01-01T05:30:00"))
    assert dec.runs == ()
    assert skips(dec) == [("01:00", "05:00", 5, "missed_deadline")]
    dec = decide(d, u("2026-01-01T05:05:00"))
    assert dec.runs == (u("2026-01-01T05:00:00"),)
    assert skips(dec) == [("01:00", "04:00", 4, "missed_deadline")]


def test_catchup_all_with_deadline() -> None:
    d = definition(catchup="all", starting_deadline=dt.timedelta(minutes=150))
    dec = decide(d, u("2026-01-01T05:30:00"))
    assert [r.hour for r in dec.runs] == [3, 4, 5]
    assert skips(dec) == [("01:00", "02:00", 2, "missed_deadline")]


@pytest.mark.parametrize(
    ("overlap", "running", "waiting", "runs", "reason", "cancel"),
    [
        ("skip", 0, 0, 1, None, False),
        ("skip", 1, 0, 0, "overlap", False),
        ("skip", 0, 1, 0, "overlap", False),
        ("queue", 1, 0, 1, None, False),
        ("queue", 1, 1, 0, "overlap", False),
        ("allow", 3, 2, 1, None, False),
        ("replace", 1, 0, 1, None, True),
        ("replace", 0, 0, 1, None, False),
    ],
)
def test_overlap(overlap: str, running: int, waiting: int, runs: int, reason: str | None,
                 cancel: bool) -> None:
    dec = decide(definition(overlap=overlap), u("2026-01-01T01:00:05"), running=running,
                 waiting=waiting)
    assert len(dec.runs) == runs
    assert [s.reason.value for s in dec.skips] == ([reason] if reason else [])
    assert dec.cancel_running is cancel


@pytest.mark.parametrize(
    ("overlap", "running", "waiting", "earliest", "runs", "cancel"),
    [
        # a run asked for after the slot came due (triggered before a late tick) is not a
        # previous run: it holds nothing back, and replace does not stop it
        ("skip", 0, 1, "01:00:30", 1, False),
        ("skip", 1, 0, "01:00:30", 1, False),
        ("queue", 1, 1, "01:00:30", 1, False),
        ("replace", 1, 0, "01:00:30", 1, False),
        # one asked for at or before the slot is: the policy applies as before
        ("skip", 0, 1, "01:00:00", 0, False),
        ("skip", 1, 1, "00:59:30", 0, False),
        ("replace", 1, 0, "00:00:00", 1, True),
    ],
)
def test_overlap_counts_only_runs_asked_for_before_the_slot(
        overlap: str, running: int, waiting: int, earliest: str, runs: int,
        cancel: bool) -> None:
    dec = decide(definition(overlap=overlap), u("2026-01-01T01:00:45"), running=running,
                 waiting=waiting, earliest=u(f"2026-01-01T{earliest}"))
    assert dec.runs == ((u("2026-01-01T01:00:00"),) if runs else ())
    assert [s.reason.value for s in dec.skips] == ([] if runs else ["overlap"])
    assert dec.cancel_running is cancel


def test_queue_keeps_only_the_latest_of_several() -> None:
    dec = decide(definition(overlap="queue", catchup="all"), u("2026-01-01T03:00:05"),
                 running=1)
    assert dec.runs == (u("2026-01-01T03:00:00"),)
    assert skips(dec) == [("01:00", "02:00", 2, "overlap")]


def test_paused_slots_are_recorded() -> None:
    d = definition(paused_at=u("2026-01-01T00:30:00"), pause_note="maintenance")
    dec = decide(d, u("2026-01-01T05:30:00"))
    assert dec.runs == ()
    assert skips(dec) == [("01:00", "05:00", 5, "paused")]
    assert dec.skips[0].detail == "paused: maintenance"
    assert dec.advance.cursor_at == u("2026-01-01T05:30:00")


def test_pause_until_resumes_by_itself_without_replaying() -> None:
    d = definition(paused_at=u("2026-01-01T00:30:00"), paused_until=u("2026-01-01T03:30:00"))
    dec = decide(d, u("2026-01-01T05:30:00"))
    assert dec.runs == (u("2026-01-01T05:00:00"),)
    assert skips(dec) == [("01:00", "03:00", 3, "paused"), ("04:00", "04:00", 1, "coalesced")]
    assert dec.advance.resumed


def test_invalid_definition_is_marked_and_recorded() -> None:
    dec = decide(definition(timezone="Not/AZone"), u("2026-01-01T05:30:00"))
    assert dec.runs == ()
    assert dec.advance.invalid_reason is not None
    assert "unknown time zone" in dec.advance.invalid_reason
    assert dec.advance.next_due_at is None
    assert [(s.reason.value, s.slot_count) for s in dec.skips] == [("invalid", None)]


def test_long_outage_is_counted_compactly() -> None:
    d = definition(schedule="* * * * *")
    dec = decide(d, u("2026-03-01T00:00:30"))
    assert dec.runs == (u("2026-03-01T00:00:00"),)
    (skip,) = dec.skips
    assert skip.reason.value == "coalesced"
    assert skip.first_slot == u("2026-01-01T00:01:00")
    assert skip.last_slot == u("2026-02-28T23:59:00")
    assert skip.slot_count is None  # more than we count


def test_dst_fall_back_fixed_job_runs_once() -> None:
    d = definition(schedule="30 2 * * *", timezone="Europe/Berlin",
                   cursor_at=u("2026-10-24T12:00:00"), next_due_at=u("2026-10-25T00:30:00"))
    dec = decide(d, u("2026-10-25T01:45:00"))
    assert dec.runs == (u("2026-10-25T00:30:00"),)
    assert dec.skips == ()
