"""The CLI teaches: every command's --help ends with real examples and shows every option's
environment variable, every command is in the table of the command-line reference
(docs/reference/cli.md), and a usage error is one line with a hint."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import make_invoke
from cronjobs.cli import main_group

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
SHELL_OPERATORS = {">", ">>", "<", "|", "||", "&&", ";", "&"}


def _commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and group below `cronjobs`, by path (`("embedded", "status")`)."""
    def walk(group: click.Group, path: tuple[str, ...]) -> Iterator[
            tuple[tuple[str, ...], click.Command]]:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            yield (*path, name), command
            if isinstance(command, click.Group):
                yield from walk(command, (*path, name))

    return walk(main_group, ())


COMMANDS = dict(_commands())
PATHS = sorted(COMMANDS)
LEAVES = [path for path in PATHS if not isinstance(COMMANDS[path], click.Group)]


def _help(path: tuple[str, ...]) -> str:
    result = make_invoke([])(*path, "--help")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def _context(path: tuple[str, ...]) -> click.Context:
    """The context the command at ``path`` gets (parsed with no arguments, resiliently)."""
    ctx = main_group.make_context("cronjobs", [], resilient_parsing=True)
    command: click.Command = main_group
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(ctx, name)
        assert found is not None
        command = found
        ctx = command.make_context(name, [], parent=ctx, resilient_parsing=True)
    return ctx


def _examples(text: str) -> list[str]:
    """The examples of the help's examples block, which must be its last paragraph (a line
    indented deeper continues the one above)."""
    paragraphs = text.split("\nOptions:\n", maxsplit=1)[0].strip().split("\n\n")
    last = paragraphs[-1].splitlines()
    assert re.fullmatch(r"\s*Examples?\b.*:", last[0]), \
        f"the help does not end with an Examples: block:\n{text}"
    examples: list[str] = []
    indent = len(last[1]) - len(last[1].lstrip())
    for line in last[1:]:
        if len(line) - len(line.lstrip()) > indent:  # continues the example above
            examples[-1] += " " + line.strip()
        else:
            examples.append(line.strip())
    return examples


def _parse_example(line: str) -> tuple[str, ...]:
    """Parse an example as the shell and cronjobs would (without running it); return the
    command path it invokes."""
    words = shlex.split(line, comments=True)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value cronjobs …
        words.pop(0)
    for i, word in enumerate(words):
        if word in SHELL_OPERATORS:
            words = words[:i]
            break
    assert words[:1] == ["cronjobs"], line
    ctx = main_group.make_context("cronjobs", [], resilient_parsing=True)
    command: click.Command = main_group
    rest = words[1:]
    path: list[str] = []
    while isinstance(command, click.Group):
        rest = click.Command.parse_args(command, ctx, rest)  # its own options; rest left
        assert rest, f"{line!r} names no command"
        found = command.get_command(ctx, rest[0])
        assert found is not None, f"{line!r}: no command {rest[0]!r}"
        path.append(rest[0])
        if isinstance(found, click.Group):
            ctx = click.Context(found, info_name=rest[0], parent=ctx)
        else:
            found.make_context(rest[0], rest[1:], parent=ctx)  # raises on bad input
        command, rest = found, rest[1:]
    return tuple(path)


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_every_help_ends_with_real_examples(path: tuple[str, ...]) -> None:
    examples = _examples(_help(path))
    assert examples
    invoked = [_parse_example(line) for line in examples]
    assert all(p[:len(path)] == path for p in invoked), (path, examples)


def test_the_top_level_help_ends_with_examples() -> None:
    result = CliRunner().invoke(main_group, ["--help"], prog_name="cronjobs")
    assert result.exit_code == 0
    assert {_parse_example(line) for line in _examples(result.stdout)} >= {("define",),
                                                                           ("list",)}


@pytest.mark.parametrize("path", [(), *PATHS], ids=lambda p: " ".join(p) or "cronjobs")
def test_every_option_shows_its_environment_variable(path: tuple[str, ...]) -> None:
    ctx = _context(path)
    text = _help(path) if path else CliRunner().invoke(main_group, ["--help"]).stdout
    flat = " ".join(text.split())
    shown = 0
    for param in ctx.command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or {"--help", "--version"} & set(
                param.opts):
            continue
        record = param.get_help_record(ctx)
        assert record is not None
        match = re.search(r"env var: ([A-Z0-9_, ]+)", record[1])
        assert match, f"{' '.join(path)} {param.opts}: no env var in {record[1]!r}"
        names = [n.strip() for n in match.group(1).split(",")]
        for name in names:
            assert name.startswith("CRONJOBS_") or name == "DATABASE_URL"
        # named after the option as typed: CRONJOBS_RUNS_JSON, not …_AS_JSON
        flag = max(param.opts, key=len).lstrip("-").replace("-", "_").upper()
        assert names[0].endswith(flag) or param.name in (
            "allowed_commands",), (param.opts, names)
        assert f"env var: {', '.join(names)}" in flat
        shown += 1
    assert shown >= 4  # at least the global options


def test_an_auto_named_environment_variable_is_read() -> None:
    invoke = make_invoke([])
    args = ("next", "0 3 * * *", "--from", "2026-01-01T00:00:00Z")
    result = invoke(*args, env={"CRONJOBS_NEXT_COUNT": "2", "CRONJOBS_NEXT_JSON": "1"})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count('"utc"') == 2
    plain = invoke(*args).stdout  # without them: the schedule in words, a table of 5
    lines = plain.splitlines()
    assert lines[:2] == ["At 03:00 (UTC)", ""]
    assert len(lines) == 2 + 1 + 5 and '"utc"' not in plain


def test_every_command_is_in_the_reference_table() -> None:
    section = CLI_PAGE.read_text().split("## Commands at a glance\n", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `cronjobs ")]
    listed = set()
    for row in rows:
        match = re.match(r"\| `cronjobs ([a-z]+(?: [a-z]+)*)", row)
        assert match, row
        listed.add(tuple(match.group(1).split()))
    assert set(LEAVES) - listed == set()
    assert listed - set(PATHS) == set()


def test_every_command_that_prints_data_has_json() -> None:
    without = {path for path in LEAVES
               if "as_json" not in {p.name for p in COMMANDS[path].params}}
    # metrics prints the Prometheus text format, itself for machines; the worker prints
    # only a line about what it did; serve answers over HTTP (its /healthz is JSON)
    assert without == {("metrics",), ("worker",), ("serve",)}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["define", "--foo"], "error: no such option '--foo' (try 'cronjobs define --help')"),
        (["define"],  # SCHEDULE is optional: a job that exists keeps its schedule
         "error: missing argument 'NAME' (try 'cronjobs define --help')"),
        (["define", "job", "@daily", "--overlap", "maybe"],
         "error: invalid value for '--overlap': 'maybe' is not one of 'skip', 'queue', "
         "'allow', 'replace' (try 'cronjobs define --help')"),
        (["lsit"],
         "error: no such command 'lsit'. Did you mean 'list'? (try 'cronjobs --help')"),
        (["embedded", "stat"],
         "error: no such command 'stat'. Did you mean 'status'? "
         "(try 'cronjobs embedded --help')"),
        (["runs", "--limt", "3"],
         # click names every option close to it, -q/--quiet of the global options too
         "error: no such option '--limt'. (Did you mean one of: '--limit', '--quiet'?) "
         "(try 'cronjobs runs --help')"),
        (["tick", "--concurrency"],
         "error: option '--concurrency' requires an argument (try 'cronjobs tick --help')"),
        (["show", "nope"],
         "error: invalid value for 'RUN_ID': 'nope' is not a run id: use the number "
         "`cronjobs runs` shows in its ID column (try 'cronjobs show --help')"),
        ([], None),
    ],
)
def test_a_usage_error_is_one_line_with_a_hint(args: list[str], line: str | None) -> None:
    result = make_invoke([])(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    if line is None:  # no command at all: the help, as click shows it
        assert result.stderr.startswith(f"Usage: cronjobs {' '.join(args)}".replace("  ", " "))
        assert "Examples:" in result.stderr
        return
    assert result.stderr == line + "\n"
