"""Hostile and malformed input to every command: no traceback, a documented exit code, and
nothing written when the command failed."""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Invoke, snapshot

DOCUMENTED = {0, 1, 2, 3}

nasty_text = st.one_of(
    st.sampled_from([
        "", " ", "-", "--", "0", "-1", "1e9", "99999999999999999999999", "NaN", "null", "{}",
        "[]", '{"a": 1}', "'; DROP TABLE job_runs; --", "$(rm -rf /)", "`id`", "a\x00b",
        "\u202e", "ü", "x" * 5000, "@daily", "* * * * *", "61 * * * *", "2026-01-01",
        "2026-13-45T99:99", "30s", "-5m", "1h30m", "Europe/Berlin", "Not/AZone", "nightly",
        "nightly.cleanup", "../etc/passwd", "%s", "%(x)s", "\\", "\n", "true",
    ]),
    st.text(max_size=40),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)

COMMANDS: list[tuple[str, list[str]]] = [
    ("define", ["NAME", "TEXT"]),
    ("define", ["NAME", "TEXT", "--tz", "TEXT"]),
    ("define", ["NAME", "@daily", "--payload", "TEXT"]),
    ("define", ["NAME", "@daily", "--command", "TEXT", "--timeout", "TEXT"]),
    ("define", ["NAME", "@daily", "--lease", "TEXT", "--backoff", "TEXT"]),
    ("define", ["NAME", "@daily", "--max-attempts", "TEXT", "--starting-deadline", "TEXT"]),
    ("describe", ["NAME"]),
    ("pause", ["NAME", "--until", "TEXT", "--note", "TEXT"]),
    ("resume", ["NAME"]),
    ("remove", ["NAME"]),
    ("next", ["TEXT", "--count", "TEXT"]),
    ("next", ["TEXT", "--from", "TEXT", "--tz", "TEXT"]),
    ("explain", ["NAME", "--from", "TEXT", "--to", "TEXT"]),
    ("backfill", ["NAME", "--from", "TEXT", "--to", "TEXT"]),
    ("retry", ["TEXT", "--attempts", "TEXT"]),
    ("trigger", ["NAME", "--payload", "TEXT"]),
    ("cancel", ["TEXT"]),
    ("runs", ["NAME", "--since", "TEXT", "--limit", "TEXT"]),
    ("runs", ["--status", "TEXT"]),
    ("show", ["TEXT"]),
    ("status", ["--max-tick-age", "TEXT"]),
    ("prune", ["--older-than", "TEXT", "--keep-last", "TEXT"]),
    ("tick", ["--now", "TEXT", "--max-runs", "0", "--concurrency", "TEXT"]),
]


@st.composite
def invocations(draw: st.DrawFn) -> list[str]:
    command, shape = draw(st.sampled_from(COMMANDS))
    args = [command]
    for slot in shape:
        if slot == "NAME":
            args.append(draw(st.one_of(st.just("existing"), nasty_text)))
        elif slot == "TEXT":
            args.append(draw(nasty_text))
        else:
            args.append(slot)
    return args


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(args=invocations())
def test_hostile_input(cli: Invoke, db: psycopg.Connection[Any], args: list[str]) -> None:
    if not db.execute("SELECT 1 FROM job_definitions WHERE name = 'existing'").fetchone():
        assert cli("define", "existing", "0 3 * * *", "--command", "true").exit_code == 0
    before = snapshot(db)
    result = cli(*args)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, (args, output)
    assert "internal error" not in output, (args, output)
    assert result.exit_code in DOCUMENTED, (args, result.exit_code, output)
    if result.exit_code != 0:
        assert result.stdout == "" or args[0] == "status", (args, result.stdout)
        assert snapshot(db) == before, args
