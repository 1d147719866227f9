"""A job definition's fields are declared once (``core.spec.FIELDS``): define's options, the
jobs file's keys, the fields apply compares and export writes, and build_spec's defaults are
built from it; upsert_definition's column lists, DefinitionSpec's attributes and the keyword
arguments of ``Client.define`` and ``@cronjobs.job`` are checked against it here, so that one
that drifts fails. (job_definitions' own columns: tests/integration/test_definition_columns.py.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import json
import re
from typing import Any

import click
import pytest
from click.testing import CliRunner

from cronjobs import Client
from cronjobs.cli import main_group
from cronjobs.cli.options import definition_options
from cronjobs.core.declarations import Declaration, fields_of, to_spec
from cronjobs.core.spec import (
    FIELDS,
    FORMS,
    KEY_COLUMN,
    RESETTABLE,
    STATE_COLUMNS,
    build_spec,
    reset_fields,
    spec_columns,
    stored_options,
    update_spec,
)
from cronjobs.db import sql
from cronjobs.errors import InvalidDefinition, UsageError
from cronjobs.execution.registry import job
from cronjobs.models import Definition, DefinitionSpec

OPTIONS = [field for field in FIELDS if not field.argument]
# the columns upsert_definition writes beside a DefinitionSpec's: the job's state
INSERTED_STATE = {"cursor_at", "next_due_at", "schedule_since", "source"}
UPDATED_STATE = {"cursor_at", "next_due_at", "schedule_since", "invalid_reason", "updated_at"}


def test_every_field_says_what_it_holds_and_how_it_is_read() -> None:
    assert len({field.name for field in FIELDS}) == len(FIELDS)
    for field in FIELDS:
        assert field.form in FORMS, field.name
        assert field.help.endswith("."), field.name
        if field.form in {"integer", "duration"}:
            assert field.bounds is not None, field.name
    assert [field.name for field in FIELDS if field.argument] == ["schedule"]


def test_a_definition_spec_holds_the_fields_columns() -> None:
    columns = spec_columns()
    assert len(columns) == len(set(columns)), "a column set by two fields"
    assert set(columns) == {f.name for f in dataclasses.fields(DefinitionSpec)}
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(DefinitionSpec)), "defaults live in FIELDS"
    # a row: the definition and the job's state (tests/integration/test_row_types.py)
    assert {f.name for f in dataclasses.fields(Definition)} - set(columns) == STATE_COLUMNS


def _upsert() -> str:
    return sql.queries()["upsert_definition"]


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def test_upsert_definition_inserts_every_column_of_the_spec() -> None:
    match = re.search(r"INSERT INTO job_definitions AS d \((.*?)\)\s*VALUES\s*\((.*?)\)\s*ON "
                      r"CONFLICT", _upsert(), re.DOTALL)
    assert match is not None
    columns, values = _items(match.group(1)), _items(match.group(2))
    assert len(columns) == len(values)
    assert set(columns) == set(spec_columns()) | INSERTED_STATE
    for column, value in zip(columns, values, strict=True):
        if column in spec_columns():
            assert value == f"%({column})s", column


def test_upsert_definition_updates_every_column_of_the_spec() -> None:
    text = _upsert()
    update = text[text.index("DO UPDATE SET"):re.search(r"^WHERE ", text, re.MULTILINE)
                  .start()]  # type: ignore[union-attr]
    assigned = re.findall(r"^    (\w+) = (.*?),?$", update, re.MULTILINE)
    assert len(assigned) == len({column for column, _ in assigned})
    assert {column for column, _ in assigned} == (
        set(spec_columns()) - {KEY_COLUMN}) | UPDATED_STATE
    for column, value in assigned:
        if column in spec_columns():
            assert value == f"excluded.{column}", column


def test_upsert_definition_compares_every_column_of_the_spec() -> None:
    match = re.search(r"^WHERE \(([^)]*)\)\s*IS DISTINCT FROM\s*\(([^)]*)\)", _upsert(),
                      re.MULTILINE)
    assert match is not None
    old = [item.removeprefix("d.") for item in _items(match.group(1))]
    new = [item.removeprefix("excluded.") for item in _items(match.group(2))]
    assert old == new
    assert len(old) == len(set(old))
    assert set(old) == set(spec_columns()) - {KEY_COLUMN}


def test_define_takes_every_field_as_built_from_the_spec() -> None:
    define = main_group.get_command(click.Context(main_group), "define")
    assert define is not None
    params = [param.name for param in define.params]
    expected = ["name", "schedule", *(field.name for field in OPTIONS)]
    assert params[:len(expected)] == expected
    options = {param.name: param for param in define.params}
    for field in OPTIONS:
        option = options[field.name]
        assert isinstance(option, click.Option)
        assert option.opts == [field.option]
        assert option.help == field.help
        assert option.metavar == field.metavar
        assert option.is_flag == (field.form == "boolean")
        assert option.multiple == (field.form in ("urls", "events"))
        if field.default not in (None, False, ()):
            assert (option.default, option.show_default) == (field.default, True)
        if isinstance(option.type, click.Choice):
            assert tuple(option.type.choices) == field.choices
        if isinstance(option.type, click.IntRange):
            assert (option.type.min, option.type.max) == field.bounds


@click.command()
@definition_options
def _probe(options: dict[str, Any]) -> None:
    click.echo(json.dumps(options, sort_keys=True))


@pytest.mark.parametrize(("args", "env", "given"), [
    ([], {}, {}),
    (["--tz", "UTC"], {}, {"tz": "UTC"}),  # given, though it is the default
    (["--alert-on-failure", "--notify", "https://a.example/x", "--notify-on", "dead"], {},
     {"alert_on_failure": True, "notify": ["https://a.example/x"], "notify_on": ["dead"]}),
    (["--max-attempts", "3"], {"PROBE_LEASE": "90s"}, {"max_attempts": 3, "lease": "90s"}),
])
def test_define_hands_over_only_the_options_given(args: list[str], env: dict[str, str],
                                                  given: dict[str, Any]) -> None:
    """What `define` on an existing job needs to keep the fields not given."""
    result = CliRunner().invoke(_probe, args, env=env, auto_envvar_prefix="PROBE")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == given


def test_the_jobs_file_takes_the_spec_fields() -> None:
    with pytest.raises(InvalidDefinition) as caught:
        to_spec(Declaration("j", {"schedule": "@daily", "nope": 1}, "here"))
    assert caught.value.message.endswith(
        f"(known: {', '.join(field.name for field in FIELDS)})")


def test_every_default_read_from_a_jobs_file_is_the_default() -> None:
    defaults = {field.name: field.default for field in FIELDS
                if field.default not in (None, ())}
    assert to_spec(Declaration("j", {"schedule": "@daily", **defaults}, "here")) == build_spec(
        name="j", schedule="@daily")


def test_fields_written_back_declare_the_same_job() -> None:
    """What apply compares and export writes: every field, read back to the same job."""
    spec = build_spec(
        name="j", schedule="H 3 * * *", tz="Europe/Berlin", command="echo hi",
        payload='{"a": 1}', catchup="all", catchup_limit=7, starting_deadline="5m",
        overlap="queue", max_attempts=4, backoff="2h", timeout="none", lease="90s",
        alert_command="alert.sh", alert_on_failure=True, pause_after_failures=3,
        group="reports", notify=("https://hooks.example.com/x",), notify_on=("failure",),
        keep_succeeded="30d", keep_failed="12w")
    fields = fields_of(spec)
    assert list(fields) == [field.name for field in FIELDS]
    assert fields["backoff"] == "2h" and fields["keep_failed"] == "84d"
    written = {key: value for key, value in fields.items() if value is not None}
    assert to_spec(Declaration("j", written, "here")) == spec
    assert spec.backoff_max == dt.timedelta(hours=2)


def _every_field_set() -> DefinitionSpec:
    return build_spec(
        name="j", schedule="H 3 * * *", tz="Europe/Berlin", command="echo hi",
        payload='{"a": [1, "\u00e9"], "b": {"c": null}}', catchup="all", catchup_limit=7,
        starting_deadline="5m", overlap="queue", max_attempts=4, backoff="2h",
        timeout="none", lease="90s", alert_command="alert.sh", alert_on_failure=True,
        pause_after_failures=3, group="reports", notify=("https://hooks.example.com/x",),
        notify_on=("failure",), keep_succeeded="30d", keep_failed="12w")


@pytest.mark.parametrize("spec", [
    _every_field_set(),
    build_spec(name="j", schedule="@daily"),
    build_spec(name="j", schedule="@daily", handler="other", timeout="7d"),
], ids=["every field", "defaults", "handler"])
def test_a_stored_definition_read_back_as_options_is_the_same(spec: DefinitionSpec) -> None:
    """What `define` on a job that exists starts from: its stored values as options."""
    options = stored_options(spec)
    assert list(options) == [field.name for field in FIELDS]
    assert build_spec(name=spec.name, **options) == spec
    assert update_spec(spec) == spec


def test_update_spec_changes_what_is_given_and_keeps_the_rest() -> None:
    base = _every_field_set()
    changed = update_spec(base, schedule="@hourly", max_attempts=9, timeout="5m")
    assert (changed.schedule, changed.max_attempts, changed.timeout) == (
        "@hourly", 9, dt.timedelta(minutes=5))
    assert dataclasses.replace(changed, schedule=base.schedule, max_attempts=4,
                               timeout=None) == base
    reset = update_spec(base, reset=[field.name for field in RESETTABLE])
    assert reset == build_spec(name="j", schedule=base.schedule, command="echo hi")
    assert update_spec(base, command="echo bye").command == "echo bye"


def test_update_spec_refuses_a_change_of_kind_unless_asked() -> None:
    command = _every_field_set()
    handler = build_spec(name="j", schedule="@daily")
    with pytest.raises(UsageError, match="--handler would make it run a Python handler"):
        update_spec(command, handler="other")
    with pytest.raises(UsageError, match="runs handler 'j': --command would make it run"):
        update_spec(handler, command="true")
    with pytest.raises(UsageError, match="cannot be used together"):
        update_spec(handler, command="true", handler="x", replace_target=True)
    replaced = update_spec(command, handler="other", replace_target=True)
    assert (replaced.command, replaced.handler, replaced.max_attempts) == (None, "other", 4)
    assert update_spec(handler, command="true", replace_target=True).command == "true"


def test_reset_names_fields_with_a_default() -> None:
    assert reset_fields(["max-attempts,--notify-on", "keep_failed", "max-attempts"]) == (
        "max_attempts", "notify_on", "keep_failed")
    for name in ("schedule", "command", "handler", "nope"):
        with pytest.raises(UsageError, match=f"invalid --reset '{name}'"):
            reset_fields([name])
    assert {field.name for field in FIELDS} - {f.name for f in RESETTABLE} == {
        "schedule", "command", "handler"}


def _keywords(function: Any) -> dict[str, tuple[Any, Any]]:
    return {name: (param.annotation, param.default)
            for name, param in inspect.signature(function).parameters.items()
            if param.kind is inspect.Parameter.KEYWORD_ONLY}


def test_the_decorator_takes_the_spec_fields() -> None:
    assert list(inspect.signature(job).parameters)[:1] == ["name"]
    assert _keywords(job) == {field.name: (field.annotation, None) for field in FIELDS
                              if field.decorator}


def test_client_define_takes_the_spec_fields() -> None:
    parameters = inspect.signature(Client.define).parameters
    assert list(parameters)[:3] == ["self", "name", "schedule"]
    assert parameters["schedule"].annotation == "str"
    keywords = _keywords(Client.define)
    assert keywords.pop("crowded_threshold") == ("int | None", None)
    assert keywords == {field.name: (field.annotation, None) for field in OPTIONS}
