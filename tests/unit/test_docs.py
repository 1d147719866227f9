"""The README stays a short front page whose links all lead somewhere, keeps the two commands
CI reads, and the generated command-line reference covers every command, option,
environment variable and exit code. (The site itself is built in strict mode by .ci/run:
`mkdocs build --strict` fails on a broken link or a missing page.)"""

from __future__ import annotations

import re
from pathlib import Path

import click

from cronjobs.cli import app, reference

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_README_LINES = 250
MAX_BENCHMARKS_LINES = 300


def _block(marker: str) -> str:
    """The fenced block between ``<!-- marker -->`` and ``<!-- /marker -->``, as .ci/run
    extracts the test command."""
    section = README.split(f"<!-- {marker} -->\n", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    match = re.fullmatch(r"```\n(.*)\n```\n", section, re.DOTALL)
    assert match, section
    return match.group(1)


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(relative) >= 20
    for link in relative:
        path = link.split("#", 1)[0]
        assert path, f"a link within the README: {link}"  # its sections are on the site now
        assert (ROOT / path).exists(), link


def test_the_readme_keeps_its_two_commands() -> None:
    assert _block("test-command") == ("python3 -m venv .venv && . .venv/bin/activate && "
                                      "pip install -e '.[embedded,test]' && pytest")
    run = _block("run-command")
    assert run.startswith("python3 -m venv .venv && . .venv/bin/activate && "
                          "pip install -e '.[embedded]' && ")
    assert run.endswith("cronjobs tick && cronjobs runs hello")


def test_every_page_is_in_the_folder_of_its_kind() -> None:
    """Diátaxis: how-to/, reference/ and explanation/; only these sit at the top."""
    top = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert top == {"index.md", "tutorial.md", "benchmarks.md", "development.md"}


def test_the_benchmarks_page_shows_todays_figures_each_with_its_command() -> None:
    """docs/benchmarks.md is a reference of the current figures, not a log of how they were
    reached: it stays short, and every section says how to measure its figures again."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(text.splitlines()) <= MAX_BENCHMARKS_LINES
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert len(sections) >= 8
    for section in sections:
        blocks = re.findall(r"^```\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
        assert any("bench/" in block for block in blocks), section.splitlines()[0]


def _options(command: click.Command, ctx: click.Context) -> list[click.Option]:
    """The options --help shows, but --help itself."""
    return [param for param in command.get_params(ctx) if isinstance(param, click.Option)
            and not param.hidden and "--help" not in param.opts]


def _leaves() -> list[str]:
    return [" ".join(("cronjobs", *path)) for path, command, _ in reference.commands()]


def test_the_reference_has_every_command_and_option() -> None:
    text = reference.cli_markdown()
    for path, command, ctx in reference.commands():
        name = " ".join(("cronjobs", *path))
        assert f"\n{'#' * (len(path) + 1)} {name}\n" in text, name
        for param in _options(command, ctx):
            record = param.get_help_record(ctx)
            assert record is not None and f"| `{record[0]}` |" in text, (name, param.opts)
    assert len(_leaves()) >= 30


def test_the_environment_reference_has_every_variable() -> None:
    text = reference.environment_markdown()
    for path, command, ctx in reference.commands():
        for param in _options(command, ctx):
            names = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
            assert names, (path, param.opts)
            for name in names:
                assert f"| `{name}` |" in text, (path, param.opts)


def test_every_exit_code_is_documented() -> None:
    constants = {value for name, value in vars(app).items() if name.startswith("EXIT_")}
    assert set(reference.EXIT_CODES) == constants
    table = reference.exit_codes_markdown()
    for code in constants:
        assert f"\n| {code} | " in table
