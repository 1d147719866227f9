"""Jobs declared as code: the jobs file and the decorator give the same definitions as
`define`, through the same validation; every bad declaration names where, the job and the
field."""

from __future__ import annotations

import datetime as dt
import re
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronjobs.core.declarations import (
    Declaration,
    declared_fields,
    dump_toml,
    read_jobs_file,
    to_specs,
)
from cronjobs.core.spec import build_spec
from cronjobs.errors import InvalidDefinition, UsageError
from cronjobs.execution.registry import declared, job, load_apps
from cronjobs.models import NotifyEvent

ROOT = Path(__file__).resolve().parents[2]


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_example_file_declares_its_jobs() -> None:
    parsed = read_jobs_file(ROOT / "jobs.example.toml")
    assert parsed.source == "billing"
    specs = to_specs(parsed.declarations)
    assert [s.name for s in specs] == ["nightly_cleanup", "backup"]
    assert specs[0].timezone == "Europe/Berlin"
    assert specs[0].payload == {"days": 7}
    assert specs[0].pause_after_failures == 5
    assert specs[0].notify_urls == ("https://hooks.example.com/services/T000/B000/XXXX",)
    assert specs[0].notify_on == (NotifyEvent.DEAD, NotifyEvent.RECOVERY)
    assert (specs[0].keep_succeeded, specs[0].keep_failed) == (dt.timedelta(days=30),
                                                               dt.timedelta(days=180))
    assert (specs[1].keep_succeeded, specs[1].keep_failed) == (None, None)
    assert specs[1].command == "pg_dump mydb > /backups/db.sql"
    assert specs[1].handler is None
    assert specs[1].notify_urls == ()


def test_the_decorator_and_the_file_give_identical_definitions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "declared_jobs_a.py").write_text(textwrap.dedent('''
        import cronjobs

        @cronjobs.job("decl_cleanup", schedule="0 3 * * *", tz="Europe/Berlin",
                      overlap="queue", timeout="2h", payload={"days": 7, "dry": False},
                      catchup="all", catchup_limit=10, starting_deadline="10m",
                      max_attempts=5, backoff="1m", lease="2m", alert_command="echo dead",
                      alert_on_failure=True, pause_after_failures=3,
                      notify=["https://hooks.example.com/T1/s3cret", "http://10.0.0.5:8080/h"],
                      notify_on="failure,dead", keep_succeeded="12w", keep_failed="default")
        def cleanup(ctx):
            pass
    '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_apps(["declared_jobs_a"])
    from_code = declared(["declared_jobs_a"])["decl_cleanup"]
    path = _file(tmp_path, '''
        [jobs.decl_cleanup]
        schedule = "0 3 * * *"
        tz = "Europe/Berlin"
        overlap = "queue"
        timeout = "2h"
        payload = { days = 7, dry = false }
        catchup = "all"
        catchup_limit = 10
        starting_deadline = "10m"
        max_attempts = 5
        backoff = "1m"
        lease = "2m"
        alert_command = "echo dead"
        alert_on_failure = true
        pause_after_failures = 3
        notify = ["https://hooks.example.com/T1/s3cret", "http://10.0.0.5:8080/h"]
        notify_on = ["dead", "failure"]
        keep_succeeded = "84d"
        keep_failed = "default"
    ''')
    from_file = read_jobs_file(path).declarations
    code_spec = to_specs([Declaration(from_code.name, from_code.options, from_code.where)])
    assert code_spec == to_specs(from_file)
    assert code_spec[0] == build_spec(
        name="decl_cleanup", schedule="0 3 * * *", tz="Europe/Berlin", overlap="queue",
        timeout="2h", payload='{"days": 7, "dry": false}', catchup="all", catchup_limit=10,
        starting_deadline="10m", max_attempts=5, backoff="1m", lease="2m",
        alert_command="echo dead", alert_on_failure=True, pause_after_failures=3,
        notify=("https://hooks.example.com/T1/s3cret", "http://10.0.0.5:8080/h"),
        notify_on=("dead", "failure"), keep_succeeded="2016h")
    assert (code_spec[0].keep_succeeded, code_spec[0].keep_failed) == (dt.timedelta(weeks=12),
                                                                       None)
    assert code_spec[0].notify_on == (NotifyEvent.DEAD, NotifyEvent.FAILURE)
    # one URL as a string, the events as an array: the same job again
    one = job("decl_one", schedule="@daily", notify="https://hooks.example.com/x",
              notify_on=("recovery",))
    one(_fuzzed)
    found = declared()["decl_one"]
    (spec,) = to_specs([Declaration(found.name, found.options, found.where)])
    assert spec.notify_urls == ("https://hooks.example.com/x",)
    assert spec.notify_on == (NotifyEvent.RECOVERY,)


def test_a_decorator_without_a_schedule_only_registers_a_handler() -> None:
    @job("decl_plain")
    def plain(ctx: object) -> None: ...

    assert "decl_plain" not in declared()
    with pytest.raises(UsageError, match="timeout given without a schedule"):
        job("decl_bad", timeout="1h")


def test_a_bad_decorator_argument_names_the_function_the_job_and_the_field() -> None:
    @job("decl_badtz", schedule="@daily", tz="Mars/Olympus")
    def badtz(ctx: object) -> None: ...

    found = declared()["decl_badtz"]
    with pytest.raises(InvalidDefinition) as caught:
        to_specs([Declaration(found.name, found.options, found.where)])
    message = caught.value.message
    assert "test_declarations.py:" in message and "badtz" in message
    assert "job 'decl_badtz': field 'tz': unknown time zone 'Mars/Olympus'" in message


@pytest.mark.parametrize(("body", "expected"), [
    ('[jobs.a]\nschedule = "@daily"\ntimout = "1h"\n',
     "jobs.toml:1: job 'a': unknown field 'timout'"),
    ('[jobs.a]\nschedule = "@daily"\n\n[jobs.b]\nschedule = "61 * * * *"\n',
     "jobs.toml:4: job 'b': invalid schedule '61 * * * *'"),
    ('[jobs.a]\nschedule = "@daily"\ntimeout = "5x"\n',
     "jobs.toml:1: job 'a': invalid timeout '5x'"),
    ('[jobs.a]\nschedule = "@daily"\nmax_attempts = 0\n',
     "jobs.toml:1: job 'a': invalid max_attempts 0: must be between 1 and 100"),
    ('[jobs.a]\nschedule = "@daily"\nmax_attempts = "3"\n',
     "jobs.toml:1: job 'a': field 'max_attempts' must be an integer, got text"),
    ('[jobs.a]\nschedule = "@daily"\noverlap = "never"\n',
     "jobs.toml:1: job 'a': invalid overlap 'never': use skip, queue, allow or replace"),
    ('[jobs.a]\nschedule = "@daily"\ncommand = "x"\nhandler = "y"\n',
     "jobs.toml:1: job 'a': command and handler cannot be used together"),
    ('[jobs.a]\ntz = "UTC"\n', "jobs.toml:1: job 'a': field 'schedule' is missing"),
    ('[jobs.a]\nschedule = "@daily"\n[jobs.a]\nschedule = "@hourly"\n',
     "jobs.toml: invalid TOML: Cannot declare ('jobs', 'a') twice (at line 3"),
    ('[jobs.a\n', "jobs.toml: invalid TOML:"),
    ('[jobs."bad name"]\nschedule = "@daily"\n', "jobs.toml:1: invalid job name 'bad name'"),
    ('[jobs.a]\nschedule = "@daily"\npayload = [1]\n',
     "jobs.toml:1: job 'a': field 'payload' must be a table"),
    ('[jobs.a]\nschedule = "@daily"\npayload = "[1]"\n',
     "jobs.toml:1: job 'a': invalid payload: expected a JSON object"),
    ('[jobs.a]\nschedule = "@daily"\npayload = { at = 2026-01-01 }\n',
     "jobs.toml:1: job 'a': field 'payload' is not JSON"),
    ('[jobs.a]\nschedule = "@daily"\nnotify = 1\n',
     "jobs.toml:1: job 'a': field 'notify' must be a URL or an array of URLs, got a number"),
    ('[jobs.a]\nschedule = "@daily"\nnotify = ["https://h.example.com", 2]\n',
     "jobs.toml:1: job 'a': field 'notify' must be a URL or an array of URLs, got an array "
     "holding a number"),
    ('[jobs.a]\nschedule = "@daily"\nnotify = ["ftp://h.example.com/x"]\n',
     "jobs.toml:1: job 'a': invalid notify: only http:// and https:// URLs are supported"),
    ('[jobs.a]\nschedule = "@daily"\nnotify = ["https://h.example.com/***"]\n',
     "jobs.toml:1: job 'a': field 'notify': URL is masked (export with --show-secrets or "
     "write the real URL)"),
    ('[jobs.a]\nschedule = "@daily"\nnotify = [' + ", ".join(
        f'"https://h.example.com/{i}"' for i in range(11)) + "]\n",
     "jobs.toml:1: job 'a': invalid notify: at most 10 URLs per job"),
    ('[jobs.a]\nschedule = "@daily"\nnotify_on = ["dead", "never"]\n',
     "jobs.toml:1: job 'a': invalid notify_on 'never': use dead, failure, recovery"),
    ('[jobs.a]\nschedule = "@daily"\nnotify_on = "dead,,sometimes"\n',
     "jobs.toml:1: job 'a': invalid notify_on 'sometimes'"),
    ('[jobs.a]\nschedule = "@daily"\nnotify_on = []\n',
     "jobs.toml:1: job 'a': field 'notify_on' is empty"),
    ('[jobs.a]\nschedule = "@daily"\nnotify_on = " , "\n',
     "jobs.toml:1: job 'a': invalid notify_on: empty"),
    ('[jobs.a]\nschedule = "@daily"\nnotify_on = { dead = true }\n',
     "jobs.toml:1: job 'a': field 'notify_on' must be an array of events or comma-separated "
     "text, got a table"),
    ('[jobs.a]\nschedule = "@daily"\nkeep_succeeded = "12h"\n',
     "jobs.toml:1: job 'a': invalid keep_succeeded '12h': must be between 1d and 3650d (or "
     "default: the global retention)"),
    ('[jobs.a]\nschedule = "@daily"\nkeep_failed = "forever"\n',
     "jobs.toml:1: job 'a': invalid keep_failed 'forever': use a number with a unit"),
    ('[jobs.a]\nschedule = "@daily"\nkeep_failed = true\n',
     "jobs.toml:1: job 'a': field 'keep_failed' must be a duration such as \"1h\", got a "
     "boolean"),
    ('sources = "x"\n', "jobs.toml: unknown top-level key 'sources'"),
    ('jobs = 1\n', "jobs.toml: 'jobs' must be a table"),
])
def test_a_bad_file_names_the_file_the_line_the_job_and_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.toml").write_text(body)
    with pytest.raises(InvalidDefinition) as caught:
        to_specs(read_jobs_file("jobs.toml").declarations)
    assert caught.value.message.startswith(expected), caught.value.message
    assert "\n" not in caught.value.message


def test_a_name_declared_twice_across_sources_is_refused() -> None:
    twice = [Declaration("a", {"schedule": "@daily"}, "jobs.toml:1"),
             Declaration("a", {"schedule": "@hourly"}, "app.py:3 (app.a)")]
    with pytest.raises(InvalidDefinition, match=r"app.py:3 \(app.a\): job 'a' is declared "
                                                r"twice \(also at jobs.toml:1\)"):
        to_specs(twice)


def test_written_fields_read_back_the_same(tmp_path: Path) -> None:
    spec = build_spec(name="odd.name:x", schedule="H 3 * * *", command="echo 'it''s' \"q\"\t\\",
                      payload='{"a": null, "b": [1, 2.5, "\\u00e9"]}', timeout="none",
                      overlap="allow")
    fields = {"schedule": spec.schedule, "command": spec.command, "payload": spec.payload,
              "timeout": "none", "overlap": "allow"}
    path = tmp_path / "out.toml"
    path.write_text(dump_toml("team's", {spec.name: fields}))
    parsed = read_jobs_file(path)
    assert parsed.source == "team's"
    assert to_specs(parsed.declarations) == [spec]
    assert declared_fields  # used by export (tested against the database)
    hooked = build_spec(name="hooked", schedule="@daily", notify=(
        "https://hooks.example.com/T0/B0/x'y", 'http://h.example.com/"q"'),
        notify_on=("failure", "recovery"))
    path.write_text(dump_toml(None, {"hooked": {
        "schedule": "@daily", "notify": list(hooked.notify_urls),
        "notify_on": ["failure", "recovery"]}}))
    assert to_specs(read_jobs_file(path).declarations) == [hooked]


def test_apply_takes_the_declarations_of_the_named_modules_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process may hold other modules' declarations (a web app, a test run): apply --app M
    takes those of M, of the modules below M, and of whatever M's import declared."""
    (tmp_path / "decl_pkg_b").mkdir()
    (tmp_path / "decl_pkg_b" / "__init__.py").write_text("from decl_pkg_b import jobs\n"
                                                          "import decl_other_c\n")
    (tmp_path / "decl_pkg_b" / "jobs.py").write_text(
        'import cronjobs\n@cronjobs.job("decl_b", schedule="@daily")\ndef b(ctx): pass\n')
    (tmp_path / "decl_other_c.py").write_text(
        'import cronjobs\n@cronjobs.job("decl_c", schedule="@daily")\ndef c(ctx): pass\n')
    (tmp_path / "decl_unrelated_d.py").write_text(
        'import cronjobs\n@cronjobs.job("decl_d", schedule="@daily")\ndef d(ctx): pass\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_apps(["decl_unrelated_d"])
    load_apps(["decl_pkg_b"])
    assert sorted(declared(["decl_pkg_b"])) == ["decl_b", "decl_c"]
    assert sorted(declared(["decl_unrelated_d"])) == ["decl_d"]


_BAD_VALUES = {
    "tz": st.sampled_from(["Mars/Olympus", "", "UTC ", "../etc/passwd"]),
    "overlap": st.text(max_size=10).filter(lambda t: t not in ("skip", "queue", "allow",
                                                               "replace")),
    "catchup": st.text(max_size=10).filter(lambda t: t not in ("latest", "all", "none")),
    "timeout": st.sampled_from(["0s", "8d", "soon", "1.5h", "-1m"]),
    "lease": st.sampled_from(["5s", "2h", "x"]),
    "backoff": st.sampled_from(["0", "2d", "later"]),
    "starting_deadline": st.sampled_from(["400d", "0m", "?"]),
    "max_attempts": st.one_of(st.integers(max_value=0), st.integers(min_value=101)),
    "catchup_limit": st.one_of(st.integers(max_value=0), st.integers(min_value=10001)),
    "pause_after_failures": st.one_of(st.integers(max_value=0), st.integers(min_value=1001)),
    "keep_succeeded": st.sampled_from(["0d", "23h", "3651d", "522w", "none", "global", ""]),
    "keep_failed": st.one_of(st.sampled_from(["1s", "forever", "-1d", [30]]),
                             st.integers(min_value=3650 * 86400 + 1).map(lambda n: f"{n}s")),
    "payload": st.sampled_from(["[]", "{", '{"a": NaN}', "null"]),
    "alert_command": st.sampled_from(["", "   ", "a\x00b"]),
    "group": st.sampled_from(["", "bad name", "_x", "x" * 129]),
    "schedule": st.sampled_from(["61 * * * *", "@never", "", "* * *"]),
    "notify": st.sampled_from(["ftp://h.example.com/x", "https://", "not a url", "", 5,
                               ["https://h.example.com/x", None], "https://h.example.com/***",
                               [f"https://h.example.com/{i}" for i in range(11)],
                               "https://h.example.com:0/x", "https://h.example.com/\u00e9"]),
    "notify_on": st.one_of(
        st.sampled_from(["", " , ", [], ["dead", 1], {"dead": True}]),
        st.text(max_size=12).filter(lambda t: t.strip() and not all(
            p.strip().lower() in ("dead", "failure", "recovery", "")
            for p in t.split(",")))),
}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_any_bad_decorator_argument_names_the_job_and_the_field(data: st.DataObject) -> None:
    """Through the decorator as through the file: one line, naming where and the job."""
    field = data.draw(st.sampled_from(sorted(_BAD_VALUES)))
    value = data.draw(_BAD_VALUES[field])
    job("decl_fuzzed", **{"schedule": "@daily", field: value})(_fuzzed)
    found = declared()["decl_fuzzed"]
    with pytest.raises(InvalidDefinition) as caught:
        to_specs([Declaration(found.name, found.options, found.where)])
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith(f"{__file__}:"), message
    assert "(test_declarations._fuzzed): job 'decl_fuzzed': " in message, message
    if field != "tz":
        assert re.search(field.replace("_", "[_ -]"), message), (field, message)
    else:
        assert "field 'tz'" in message


def _fuzzed(ctx: object) -> None: ...
