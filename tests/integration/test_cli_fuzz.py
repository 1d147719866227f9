"""Hostile and malformed input to every command: no traceback, a documented exit code, and
nothing written when the command failed."""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Invoke, snapshot
from cronjobs.validation import NAME_PATTERN

DOCUMENTED = {0, 1, 2, 3, 4}
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")  # then a fixed seed

nasty_text = st.one_of(
    st.sampled_from([
        "", " ", "-", "--", "0", "-1", "1e9", "99999999999999999999999", "NaN", "null", "{}",
        "[]", '{"a": 1}', "'; DROP TABLE job_runs; --", "$(rm -rf /)", "`id`", "a\x00b",
        "\u202e", "ü", "x" * 5000, "@daily", "* * * * *", "61 * * * *", "2026-01-01",
        "2026-13-45T99:99", "30s", "-5m", "1h30m", "Europe/Berlin", "Not/AZone", "nightly",
        "nightly.cleanup", "../etc/passwd", "%s", "%(x)s", "\\", "\n", "true",
        "0 3 L * *", "0 0 * * fri#3", "0 0 15W * 5L", "0 0 L-31 * *", "0 0 * * fri#9",
        "L", "5L", "fri#3", "0 0 31W 2 *",
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
    ("trigger", ["NAME", "--at", "TEXT"]),
    ("trigger", ["NAME", "--in", "TEXT"]),
    ("cancel", ["TEXT"]),
    ("runs", ["NAME", "--since", "TEXT", "--limit", "TEXT"]),
    ("runs", ["--status", "TEXT"]),
    ("show", ["TEXT"]),
    ("logs", ["TEXT"]),
    ("define", ["NAME", "@daily", "--command", "true", "--notify", "TEXT"]),
    ("define", ["NAME", "@daily", "--notify", "https://example.com/x", "--notify-on", "TEXT"]),
    ("status", ["--max-tick-age", "TEXT"]),
    ("status", ["--check", "--max-lateness", "TEXT"]),
    ("tick", ["--now", "TEXT", "--max-runs", "0", "--concurrency", "TEXT"]),
    ("apply", ["TEXT", "--dry-run"]),
    ("apply", ["TEXT", "--source", "TEXT", "--prune"]),
    ("export", ["NAME", "--format", "TEXT"]),
    ("define", ["NAME", "@daily", "--group", "TEXT"]),
    ("define", ["NAME", "@daily", "--keep-succeeded", "TEXT", "--keep-failed", "TEXT"]),
    ("retention", ["--succeeded", "TEXT", "--ticks", "TEXT"]),
    ("retention", ["--failed", "TEXT", "--skips", "TEXT"]),
    ("group", ["set", "TEXT", "--max-running", "TEXT"]),
    ("group", ["show", "NAME"]),
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


@settings(max_examples=250, deadline=None, derandomize=CI,
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


# -- input that is wrong, always: exit 2, one line, nothing written ----------------------------
#
# Every command that takes input, with one of its inputs drawn from values that are invalid
# by construction (out of what Python or PostgreSQL can hold, or not of the option's form),
# the others valid. Examples are bounded per command and derandomized in CI.

ZONES = st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                         dt.timezone(dt.timedelta(hours=-23, minutes=-59)),
                         dt.timezone(dt.timedelta(hours=5, minutes=30))])
_DURATION = re.compile(r"\s*(\d+|(\d+[smhdwSMHDW])+)\s*")
_FROM_NOW = re.compile(r"\s*(now|[+-]?(\d+[smhdw])+)\s*", re.IGNORECASE)  # now, -2d, +2h


def _not_time(text: str) -> bool:
    try:
        dt.date.fromisoformat(text.strip())
    except ValueError:
        try:
            dt.datetime.fromisoformat(text.strip())
        except ValueError:
            return not _DURATION.fullmatch(text) and not _FROM_NOW.fullmatch(text)
    return False


# instants beyond what Python's datetime holds once in UTC, or outside 1900..9000
far_instants = st.one_of(
    st.datetimes(max_value=dt.datetime(1899, 12, 30), timezones=ZONES),
    st.datetimes(min_value=dt.datetime(9000, 1, 2), timezones=ZONES),
).map(lambda t: t.isoformat())
far_dates = st.one_of(
    st.dates(max_value=dt.date(1899, 12, 30)), st.dates(min_value=dt.date(9000, 1, 2)),
).map(str)
bad_instants = st.one_of(far_instants, far_dates, st.sampled_from([
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "9999-12-31", "tomorrow",
    "2026-02-30", "2026-01-01T25:00", "2026-01-01T00:00:00+25:00", "999999999w", "0s",
    "-0s", "+-2h", "2h ago", "now+2h", "1e9", "2026-01-01\x00", "\ud800"]),
    st.text(max_size=30).filter(_not_time))
bad_durations = st.one_of(
    st.integers(min_value=36501, max_value=10**9 - 1).map(lambda n: f"{n}d"),
    st.integers(min_value=5215, max_value=10**9 - 1).map(lambda n: f"{n}w"),
    st.lists(st.integers(min_value=10**8, max_value=10**9 - 1).map(lambda n: f"{n}w"),
             min_size=2, max_size=4).map("".join),
    st.sampled_from(["0", "0s", "0m0s", "-5m", "1.5h", "5 minutes", "forever", "1e9",
                     "9999999999", "\x00", "1h\n1m"]),
    st.text(max_size=20).filter(lambda t: not _DURATION.fullmatch(t)),
)
_BAD_JSON_VALUES = ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e400", '"\\ud800"',
                    '"\\udfff x"', '"\\u0000"', '{"\\u0000": 1}', '"a\\ud83d"']
bad_payloads = st.one_of(
    st.tuples(st.sampled_from(_BAD_JSON_VALUES),
              st.sampled_from(['{{"k": {}}}', '{{"a": [1, {}]}}', '{{"a": {{"b": {}}}}}',
                               '{{"x": 1, "k": {}}}'])).map(lambda p: p[1].format(p[0])),
    st.sampled_from(["[]", "null", "1", '"s"', "true", "{", "{'a': 1}", '{"a": 1,}', "",
                     "[" * 5000, '{"a": ' + "[" * 3000 + "]" * 3000 + "}",
                     '{"a": "' + "x" * 70000 + '"}']),
)
bad_names = st.one_of(
    st.sampled_from(["", "_x", "bad name", "x" * 129, "a\x00", "job;", "é", "a/b", "\ud800"]),
    st.text(min_size=1, max_size=40).filter(
        lambda t: not NAME_PATTERN.fullmatch(t) and not t.startswith("-")),
)
# The day extensions, wrong: where they do not belong, out of range, with a range or step,
# in a form of another cron, or never firing.
_BAD_DAY_OF_MONTH = st.one_of(
    st.sampled_from(["L-0", "L-31", "0W", "32W", "W", "W15", "L3", "5L", "1-L", "L/2", "15W/2",
                     "1-15W", "LW/3", "L-", "L--1", "5#3", "1,,L", "L,", "H(L)", "L,H", "Lx",
                     "LWW", "L-3W", "?"]),
    st.integers(min_value=31, max_value=10**6).map(lambda n: f"L-{n}"),
    st.integers(min_value=32, max_value=10**6).map(lambda n: f"{n}W"),
)
_BAD_DAY_OF_WEEK = st.one_of(
    st.sampled_from(["L", "L5", "l0", "fri#0", "fri#6", "fri#", "#3", "*#2", "mon-fri#2",
                     "fri#3/2", "5L/2", "1-5L", "*L", "9L", "8#1", "funL", "fun#1", "15W",
                     "5W", "LW", "fri#3#2", "fri##3", "7-mon", "sat-mon"]),
    st.integers(min_value=6, max_value=10**6).map(lambda n: f"fri#{n}"),
    st.integers(min_value=8, max_value=10**6).map(lambda n: f"{n}L"),
)
bad_extensions = st.one_of(
    _BAD_DAY_OF_MONTH.map(lambda f: f"0 0 {f} * *"),
    _BAD_DAY_OF_WEEK.map(lambda f: f"0 0 * * {f}"),
    # in the minute, hour or month field
    st.tuples(st.sampled_from([0, 1, 3]),
              st.sampled_from(["L", "LW", "15W", "L-3", "fri#3", "5L", "1#1", "1-L"]))
    .map(lambda p: " ".join(p[1] if i == p[0] else ("0" if i < 2 else "*") for i in range(5))),
    st.sampled_from(["0 0 31W 2,4 *", "0 0 L-29 2 *", "0 0 LW * */6", "0 0 */10 2 fri#5",
                     "0 0 30W feb *"]),
)
bad_schedules = st.one_of(
    st.sampled_from(["61 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
                     "0 0 30 2 *", "* * *", "@reboot", "@never", "*/0 * * * *",
                     "1-0 * * * *", "H(5-1) * * * *", "* * * * * *", "\x00 * * * *", ""]),
    st.lists(st.integers(min_value=60, max_value=10**12).map(str), min_size=5, max_size=5)
    .map(" ".join),
    bad_extensions,
)
bad_zones = st.one_of(
    st.sampled_from(["Mars/Olympus", "", " UTC", "UTC ", "../etc/passwd", "/etc/localtime",
                     "localtime", "Europe/\x00", "\ud800", "Europe"]),
    st.text(min_size=1, max_size=30).filter(lambda t: "/" in t and not t.startswith("-")),
)

# Each shape: its arguments, with the one slot that gets a bad value named by its kind.
SHAPES: dict[str, list[list[str]]] = {
    "define": [["NAME", "@daily"], ["job", "SCHEDULE"], ["job", "@daily", "--tz", "ZONE"],
               ["job", "@daily", "--payload", "JSON"], ["job", "@daily", "--timeout", "DUR"],
               ["job", "@daily", "--lease", "DUR"], ["job", "@daily", "--backoff", "DUR"],
               ["job", "@daily", "--starting-deadline", "DUR"],
               ["job", "@daily", "--group", "NAME"],
               ["job", "@daily", "--notify", "URL"],
               ["job", "@daily", "--notify", "https://example.com/hook", "--notify", "URL"],
               ["job", "@daily", "--notify-on", "EVENTS"],
               ["job", "@daily", "--keep-succeeded", "KEEP"],
               ["job", "@daily", "--keep-succeeded", "30d", "--keep-failed", "KEEP"]],
    "retention": [["--succeeded", "KEEP"], ["--failed", "KEEP"], ["--skips", "KEEP"],
                  ["--ticks", "KEEP"], ["--succeeded", "30d", "--ticks", "KEEP"]],
    "group": [["set", "NAME", "--max-running", "2"], ["show", "NAME"], ["remove", "NAME"]],
    "pause": [["existing", "--until", "TIME"], ["NAME"]],
    "next": [["@daily", "--from", "TIME"], ["existing", "--from", "TIME"],
             ["@daily", "--tz", "ZONE"], ["SCHEDULE"]],
    "explain": [["existing", "--from", "TIME"], ["existing", "--to", "TIME"], ["NAME"]],
    "backfill": [["existing", "--from", "TIME", "--to", "2020-01-01"],
                 ["existing", "--from", "2020-01-01", "--to", "TIME"]],
    "runs": [["--since", "TIME"], ["NAME"]],
    "trigger": [["existing", "--payload", "JSON"], ["NAME"], ["existing", "--at", "TIME"],
                ["existing", "--in", "DUR"]],
    "status": [["--max-tick-age", "DUR"], ["--max-backlog-age", "DUR"]],
    "tick": [["--now", "TIME"], ["--max-runtime", "DUR"], ["--grace", "DUR"],
             ["--dashboard-url", "DASHBOARD"]],
    "logs": [["RUNID"]],
    "describe": [["NAME"]],
    "resume": [["NAME"]],
    "remove": [["NAME"]],
    "list": [],  # with a bad --connect-timeout
}
bad_urls = st.one_of(
    st.sampled_from(["ftp://example.com/hook", "file:///etc/passwd", "javascript:alert(1)",
                     "http://", "https://", "http:///no-host", "example.com/hook", "", " ",
                     "http://exa mple.com/", "http://[::1/", "http://host:99999/",
                     "http://host:0/", "mailto:ops@example.com", "http://bücher.example/",
                     "https://example.com/\x00", "//example.com/hook", "\ud800",
                     "https://example.com/" + "x" * 3000, "gopher://h/", "data:,x",
                     "http://user@/", "https://example.com/a\nb"]),
    st.text(max_size=40).filter(
        lambda t: not t.strip().lower().startswith(("http://", "https://"))
        and not t.startswith("-")),
)
bad_events = st.one_of(
    st.sampled_from(["", ",", " , ", "deadd", "all", "success", "DEAD;recovery", "\x00",
                     "none", "dead recovery"]),
    st.text(max_size=20).filter(lambda t: t.strip(", ") != "" and not set(
        v.strip().lower() for v in t.split(",") if v.strip()) <= {"dead", "failure",
                                                                  "recovery"}
        and not t.startswith("-")),
)
# retentions: not a duration, or outside 1 day to 3650 days
bad_keeps = st.one_of(
    bad_durations.filter(lambda t: t.strip().lower() != "default"),
    st.integers(min_value=1, max_value=86399).map(lambda n: f"{n}s"),
    st.integers(min_value=1, max_value=23).map(lambda n: f"{n}h"),
    st.integers(min_value=3651, max_value=36500).map(lambda n: f"{n}d"),
    st.integers(min_value=522, max_value=5214).map(lambda n: f"{n}w"),
    st.sampled_from(["0d", "3650d1s", "86399", "never", "none", "global"]),
)
bad_run_ids = st.one_of(st.sampled_from(["0", "-1", "x", "", "1.5", str(2**63), "1e3"]),
                        st.integers(max_value=0).map(str))
BAD = {"URL": bad_urls,
       # an empty --dashboard-url (or CRONJOBS_DASHBOARD_URL) means none, as for every env var
       "DASHBOARD": bad_urls.filter(lambda u: u != ""), "EVENTS": bad_events,
       "RUNID": bad_run_ids, "NAME": bad_names, "SCHEDULE": bad_schedules, "ZONE": bad_zones,
       "JSON": bad_payloads,
       "DUR": bad_durations, "KEEP": bad_keeps, "TIME": bad_instants}


@st.composite
def wrong_invocations(draw: st.DrawFn, command: str) -> list[str]:
    if not SHAPES[command]:
        return ["--connect-timeout", draw(bad_durations), command]
    shape = draw(st.sampled_from(SHAPES[command]))
    return [command, *(draw(BAD[slot]) if slot in BAD else slot for slot in shape)]


@pytest.mark.parametrize("command", sorted(SHAPES))
def test_wrong_input_is_a_usage_error(cli: Invoke, db: psycopg.Connection[Any],
                                      command: str) -> None:
    """Exit 2, exactly one line on stderr, nothing on stdout, no row written."""
    assert cli("define", "existing", "0 3 * * *", "--command", "true").exit_code == 0
    before = snapshot(db)

    @settings(max_examples=60, deadline=None, derandomize=CI, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(args=wrong_invocations(command))
    def check(args: list[str]) -> None:
        result = cli(*args)
        assert result.exit_code == 2, (args, result.exit_code, result.stdout, result.stderr)
        assert result.stdout == "", (args, result.stdout)
        assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), (
            args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert snapshot(db) == before, args

    check()


@pytest.mark.parametrize("command", ["define", "next"])
def test_bad_day_extensions_are_usage_errors(cli: Invoke, db: psycopg.Connection[Any],
                                             command: str) -> None:
    """L, W and # where they do not belong, malformed or never firing: exit 2, one line on
    stderr naming the problem, nothing on stdout, nothing written."""
    assert cli("define", "existing", "0 3 L * *", "--command", "true").exit_code == 0
    before = snapshot(db)

    @settings(max_examples=80, deadline=None, derandomize=CI, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(schedule=bad_extensions)
    def check(schedule: str) -> None:
        args = ["define", "job", schedule] if command == "define" else ["next", schedule]
        result = cli(*args)
        assert result.exit_code == 2, (args, result.exit_code, result.stdout, result.stderr)
        assert result.stdout == "", (args, result.stdout)
        assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), (
            args, result.stderr)
        assert result.stderr.startswith("error: "), result.stderr
        assert "field" in result.stderr or "never fires" in result.stderr, result.stderr
        assert snapshot(db) == before, args


# -- jobs files: a file with one bad job among good ones applies nothing ----------------------

GOOD_JOB = '[jobs.good]\nschedule = "@daily"\ncommand = "true"\n'
_toml_keys = st.sampled_from(["schedule", "tz", "command", "handler", "payload", "catchup",
                              "catchup_limit", "starting_deadline", "overlap", "max_attempts",
                              "backoff", "timeout", "lease", "alert_command",
                              "alert_on_failure", "pause_after_failures", "notify",
                              "notify_on", "keep_succeeded", "keep_failed"])


def _toml_string(text: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}"
                         for c in text if not 0xD800 <= ord(c) <= 0xDFFF) + '"'


_bad_notify = st.sampled_from([
    '"ftp://hooks.example.com/x"', '["https://"]', '["not a url"]', '[""]', "5", "true",
    '["https://hooks.example.com/x", 1]', '["https://hooks.example.com/***"]',
    '"https://hooks.example.com:0/x"', '["https://hooks.example.com/a b"]',
    '["https://hooks.example.com/\u00e9"]', "{ url = \"https://hooks.example.com\" }",
    "[" + ", ".join(f'"https://hooks.example.com/{i}"' for i in range(11)) + "]",
])
_bad_notify_on = st.one_of(
    st.sampled_from(['""', '" , "', "[]", '["dead", 1]', "{ dead = true }", "3",
                     '["dead", "sometimes"]']),
    nasty_text.map(lambda t: "".join(c for c in t if not 0xD800 <= ord(c) <= 0xDFFF))
    .filter(lambda t: bool(t.strip()) and not all(
        p.strip().lower() in ("dead", "failure", "recovery", "") for p in t.split(",")))
    .map(_toml_string))


@st.composite
def bad_job_files(draw: st.DrawFn) -> str:
    """A jobs file whose last job is wrong: broken TOML, an unknown field, a value of the
    wrong type or out of range, or a name declared twice."""
    kind = draw(st.sampled_from(["syntax", "unknown", "value", "type", "twice", "name",
                                 "notify"]))
    if kind == "notify":
        key, value = draw(st.sampled_from([("notify", _bad_notify),
                                           ("notify_on", _bad_notify_on)]).flatmap(
            lambda pair: st.tuples(st.just(pair[0]), pair[1])))
        return (GOOD_JOB + '[jobs.bad]\nschedule = "@daily"\nnotify = '
                '["https://hooks.example.com/ok"]\n' if key == "notify_on" else
                GOOD_JOB + '[jobs.bad]\nschedule = "@daily"\n') + f"{key} = {value}\n"
    if kind == "syntax":
        return GOOD_JOB + draw(st.sampled_from(
            ["[jobs.bad\n", "[jobs.bad]\nschedule = \n", "[jobs.bad]\nschedule = '@daily\n",
             "[jobs.bad]\nschedule = \"@daily\"\nschedule = \"@daily\"\n", "= 1\n",
             "\x00", "[jobs.good]\nschedule = \"@hourly\"\n"]))
    if kind == "twice":
        return GOOD_JOB + GOOD_JOB
    if kind == "name":
        name = draw(bad_names)
        return GOOD_JOB + f'[jobs.{_toml_string(name)}]\nschedule = "@daily"\n'
    if kind == "unknown":
        key = draw(st.from_regex(r"[a-z_]{1,20}", fullmatch=True).filter(
            lambda k: k not in ("schedule", "tz", "command", "handler", "payload", "catchup",
                                "catchup_limit", "starting_deadline", "overlap", "max_attempts",
                                "backoff", "timeout", "lease", "alert_command",
                                "alert_on_failure", "pause_after_failures", "group",
                                "notify", "notify_on", "keep_succeeded", "keep_failed")))
        return GOOD_JOB + f'[jobs.bad]\nschedule = "@daily"\n{key} = 1\n'
    if kind == "type":
        key = draw(_toml_keys)
        value = "[1, 2]" if key != "payload" else "1"
        if key == "schedule":
            return GOOD_JOB + "[jobs.bad]\nschedule = 5\n"
        return GOOD_JOB + f'[jobs.bad]\nschedule = "@daily"\n{key} = {value}\n'
    key, strategy = draw(st.sampled_from([
        ("schedule", bad_schedules), ("tz", bad_zones), ("timeout", bad_durations),
        ("lease", bad_durations), ("backoff", bad_durations),
        ("starting_deadline", bad_durations), ("payload", bad_payloads),
        ("overlap", nasty_text.filter(lambda t: t not in ("skip", "queue", "allow", "replace"))),
        ("max_attempts", st.integers().filter(lambda n: not 1 <= n <= 100)),
        ("catchup_limit", st.integers().filter(lambda n: not 1 <= n <= 10000)),
        ("pause_after_failures", st.integers().filter(lambda n: not 1 <= n <= 1000)),
        ("keep_succeeded", bad_keeps), ("keep_failed", bad_keeps),
        ("keep_failed", st.integers().filter(lambda n: not 86400 <= n <= 3650 * 86400)),
    ]))
    value = draw(strategy)
    written = str(value) if isinstance(value, int) else _toml_string(value)
    if key == "schedule":
        return GOOD_JOB + f"[jobs.bad]\nschedule = {written}\n"
    return GOOD_JOB + f'[jobs.bad]\nschedule = "@daily"\n{key} = {written}\n'


def test_a_bad_jobs_file_applies_nothing(cli: Invoke, db: psycopg.Connection[Any],
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """Exit 2, one line naming the file, nothing written, whatever is wrong in it."""
    assert cli("define", "existing", "0 3 * * *", "--command", "true").exit_code == 0
    before = snapshot(db)
    path = tmp_path_factory.mktemp("files") / "jobs.toml"

    @settings(max_examples=150, deadline=None, derandomize=CI, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=bad_job_files(), flags=st.sampled_from([(), ("--dry-run",), ("--prune",),
                                                         ("--adopt", "--json")]))
    def check(text: str, flags: tuple[str, ...]) -> None:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        result = cli("apply", str(path), *flags)
        assert result.exit_code == 2, (text, result.exit_code, result.stdout, result.stderr)
        assert result.stdout == "", (text, result.stdout)
        assert result.stderr.startswith(f"error: {path}"), (text, result.stderr)
        assert result.stderr.count("\n") == 1, (text, result.stderr)
        assert snapshot(db) == before, text

    check()
