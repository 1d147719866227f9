"""The command-line reference in Markdown, generated from the click commands themselves, so
that it cannot drift from them: every command (the lazily loaded ones too) with its usage,
help text and options, each option's environment variable and default as ``--help`` shows
them, every environment variable, and the exit codes.

The documentation site calls these at build time (``docs/hooks.py`` puts them where a page
says ``<!-- generated: ... -->``); nothing else imports this module.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection, Iterator

import click

from cronjobs.cli import main_group
from cronjobs.cli.app import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_UNHEALTHY,
    EXIT_USAGE,
)

# What each exit code means; a test checks that every EXIT_* constant of cronjobs.cli.app
# has a line here.
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success (`logs` too, whatever the run's outcome, which it prints on stderr; a "
             "`--watch` ended by Ctrl-C too)",
    EXIT_FAILURE: "the world failed: the database could not be reached (after retries), or an "
                  "internal error. For `tick`: the tick itself failed — failed *jobs* are "
                  "recorded, not tick failures, and a tick stopped by SIGTERM/SIGINT exits 0 "
                  "after putting its runs back",
    EXIT_USAGE: "bad input, configuration or a refused request: invalid schedule, zone, name, "
                "payload, id, date or duration, unknown job or run, a removed job acted on "
                "(`pause`, `trigger`, `next`, ... say when it was removed) or a retry of one "
                "of its runs, no database configured, "
                "schema missing or out of date, a retry of a run that is still queued or "
                "running, an `ack` of a run that is not dead, a trigger the overlap policy "
                "refuses, a bad jobs file or decorator argument, an `apply` conflict, a "
                "`serve` port in use, a `backfill` beyond `--max-runs`, a `backfill`, "
                "`remove` or `ack --all` not confirmed (answered no, or off a terminal "
                "without `--yes`). **Nothing was written.**",
    EXIT_UNHEALTHY: "`status --check` only: something is wrong (the problems are printed on "
                    "stderr), the storage's health included; warnings alone exit 0",
    EXIT_PENDING: "`apply --dry-run` only: changes are pending, the database does not match "
                  "the declarations (the diff is printed on stdout)",
    EXIT_INTERRUPTED: "stopped by Ctrl-C (SIGINT) outside a tick or a `--watch`, e.g. "
                      "`logs --follow`",
}

_EXTRAS = re.compile(r"\s*\[([^\[\]]*)\]\s*$")


def commands() -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every command and group below ``cronjobs``, by path, with the context it gets (its
    options' environment variables named, as when it parses its arguments)."""

    def walk(group: click.Group, ctx: click.Context, path: tuple[str, ...]) -> Iterator[
            tuple[tuple[str, ...], click.Command, click.Context]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
            yield (*path, name), command, sub
            if isinstance(command, click.Group):
                yield from walk(command, sub, (*path, name))

    top = main_group.make_context("cronjobs", [], resilient_parsing=True)
    return walk(main_group, top, ())


def _global_flags() -> set[str]:
    return {opt for param in main_group.params for opt in param.opts}


def options(command: click.Command, ctx: click.Context, *, skip: Collection[str] = ()
            ) -> list[tuple[str, str, str, str]]:
    """(flags, environment variables, default and limits, help) of each option, as --help
    shows them."""
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or set(param.opts) & set(skip):
            continue
        if {"--help", "--version"} & set(param.opts):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        flags, text = record
        extras: list[str] = []
        match = _EXTRAS.search(text)
        if match:
            extras = [part.strip() for part in match.group(1).split(";")]
            text = text[:match.start()]
        env = next((e.removeprefix("env var: ") for e in extras if e.startswith("env var:")),
                   "")
        rest = [e for e in extras if not e.startswith("env var:")]
        rows.append((flags, env, "; ".join(rest), text.strip()))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """A code span in a table cell (Python-Markdown's tables leave a pipe in one alone)."""
    return f"`{text}`" if text else ""


def _help_markdown(text: str) -> str:
    """Click's help text as Markdown: a paragraph click keeps as written (``\\b``) becomes a
    code block, its label (``Examples:``) a line of its own above it."""
    out: list[str] = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            lines = lines[1:]
            if lines and lines[0].rstrip().endswith(":") and not lines[0].startswith(" "):
                out.append(f"**{lines[0].strip()}**")
                lines = lines[1:]
            block = inspect.cleandoc("\n".join(lines))
            out.append(f"```\n{block}\n```")
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def _options_table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| option | environment variable | default, limits | what it does |",
             "|---|---|---|---|"]
    lines += [f"| {_code(flags)} | {_code(env)} | {_cell(extra)} | {_cell(text)} |"
              for flags, env, extra, text in rows]
    return "\n".join(lines)


def cli_markdown() -> str:
    """The whole command reference: the global options, then every command in turn."""
    top = main_group.make_context("cronjobs", [], resilient_parsing=True)
    parts = ["## Global options",
             "Before the command or after it (`cronjobs -v tick` and `cronjobs tick -v` are the "
             "same).",
             _options_table(options(main_group, top))]
    skip = _global_flags()
    for path, command, ctx in commands():
        name = " ".join(("cronjobs", *path))
        level = "#" * (len(path) + 1)
        usage = " ".join(command.collect_usage_pieces(ctx))
        parts += [f"{level} {name}", f"```\n{name} {usage}\n```",
                  _help_markdown(command.help or "")]
        rows = options(command, ctx, skip=skip)
        if rows:
            parts.append(_options_table(rows))
        if isinstance(command, click.Group):
            subs = [f"`{name} {sub}`" for sub in command.list_commands(ctx)]
            parts.append("Commands: " + ", ".join(subs) + ".")
    return "\n\n".join(parts) + "\n"


def environment_markdown() -> str:
    """Every environment variable any option reads, with the option it stands for."""
    found: dict[str, set[str]] = {}
    top = main_group.make_context("cronjobs", [], resilient_parsing=True)
    for flags, env, _, _ in options(main_group, top):
        for var in filter(None, (v.strip() for v in env.split(","))):
            found.setdefault(var, set()).add(f"cronjobs {flags.split(',')[-1].split()[0]}")
    skip = _global_flags()
    for path, command, ctx in commands():
        for flags, env, _, _ in options(command, ctx, skip=skip):
            flag = flags.split(",")[-1].split()[0].split("/")[0]
            for var in filter(None, (v.strip() for v in env.split(","))):
                found.setdefault(var, set()).add(" ".join(("cronjobs", *path, flag)))
    lines = ["| variable | stands for |", "|---|---|"]
    lines += [f"| `{var}` | {', '.join(f'`{o}`' for o in sorted(found[var]))} |"
              for var in sorted(found)]
    return "\n".join(lines) + "\n"


def exit_codes_markdown() -> str:
    lines = ["| code | meaning |", "|---|---|"]
    lines += [f"| {code} | {meaning} |" for code, meaning in sorted(EXIT_CODES.items())]
    return "\n".join(lines) + "\n"
