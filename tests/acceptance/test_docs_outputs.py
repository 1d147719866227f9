"""What the documentation shows a command print is what it prints: every ```console block of
README.md and of the pages under docs/ is a transcript, run in order, in a database of its
own for each page, by the installed ``cronjobs`` in a shell, and compared with what the page
shows, once times, dates and the like are masked (``mask``).

The convention (docs/development.md, "Shown output"):

- a ```console block is a transcript: each line that starts with ``$ `` is a command, run
  with ``bash -c`` (so ``; echo "exit=$?"`` works), and the lines up to the next command are
  what it prints, stdout and stderr as a terminal interleaves them. A page's blocks run in
  order and share its database, so a later block sees what an earlier one did;
- a block whose output cannot be reproduced as written (it needs days of history, or names
  this machine's paths) is a ```text block, or a plain ``` one: it is not run;
- ``<!-- docs-test: wait WHAT -->`` on the line just before a console block waits before
  running it: ``next-minute`` (until the next minute has started, as a page that says
  "wait for the next minute" asks its reader), ``early-minute`` (until at most 30 s of the
  minute have gone, so that the block and the next ones up to a ``next-minute`` run within
  one minute, as they do for a reader who follows the page at once), or a duration such as
  ``10s`` ("ten seconds later").

To see what a page's blocks print now (to update a page after a change of wording):
``python tests/acceptance/test_docs_outputs.py docs/tutorial.md`` with
``CRONJOBS_DATABASE_URL`` naming an empty, migrated database.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(?:<!-- docs-test: wait ([\w-]+) -->\n)?```console\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Step:
    command: str
    shown: str  # what the page shows it print
    wait: str | None = None  # the block's wait, on its first command


def steps(text: str) -> list[Step]:
    """The command/output pairs of a page's console blocks, in order."""
    found: list[Step] = []
    for match in BLOCK.finditer(text):
        wait = match.group(1)
        command: str | None = None
        shown: list[str] = []
        for line in match.group(2).splitlines():
            if line.startswith("$ "):
                if command is not None:
                    found.append(Step(command, "\n".join(shown), wait))
                    wait = None
                command, shown = line[2:], []
            else:
                assert command is not None, f"output before any command: {line!r}"
                shown.append(line)
        assert command is not None, "a console block without a command"
        found.append(Step(command, "\n".join(shown), wait))
    return found


MASKS = [
    # relative times: (in 25 s), (3 s ago), (now), (in 1 min), (in 13 h)
    (re.compile(r"\((?:in [^()]*|[^()]* ago|now)\)"), "(…)"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "YYYY-MM-DD"),
    (re.compile(r"\b\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"), "hh:mm"),
    (re.compile(r"(?<=hh:mm )(?:[A-Z]{3,5}|[+-]\d{2})\b"), "ZONE"),  # CET, CEST, UTC, +03
    (re.compile(r"\(\d[\d,]* slots\)"), "(N slots)"),  # how many slots a range holds
    (re.compile(r"\b\d+(?:\.\d+)?(?:ms|s)\b"), "Ns"),  # how long an attempt took
    (re.compile(r"\bon [^\s,]+:\d+"), "on HOST:PID"),  # the worker that ran an attempt
    (re.compile(r"\bpid \d+"), "pid N"),
]


def mask(text: str) -> str:
    """What may differ from one run to the next, replaced by a placeholder: relative times,
    dates, clock times and the zone's abbreviation after them, the number of slots in a
    folded range, durations in seconds, the worker's host:pid and process ids; then runs of
    spaces become one (columns are as wide as what they hold) and trailing blank lines go.
    Run ids, names, counts and words stay: a page's transcript starts from an empty
    database, so its ids are those it shows."""
    for pattern, placeholder in MASKS:
        text = pattern.sub(placeholder, text)
    lines = [re.sub(r" {2,}", " ", line).rstrip() for line in text.splitlines()]
    return "\n".join(lines).rstrip("\n")


def wait(what: str) -> None:
    if what == "next-minute":
        time.sleep(60 - time.time() % 60 + 1)
    elif what == "early-minute":
        if time.time() % 60 > 30:
            time.sleep(60 - time.time() % 60 + 1)
    else:
        seconds = re.fullmatch(r"(\d+)s", what)
        assert seconds, f"unknown wait {what!r}"
        time.sleep(int(seconds.group(1)) + 0.5)


def run(command: str, env: dict[str, str]) -> str:
    """What ``command`` prints at a terminal: stdout and stderr in the order they came."""
    done = subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, timeout=120,
                          check=False, cwd=ROOT)
    return done.stdout


def environment(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PG", "CRONJOBS_")) and k != "DATABASE_URL"}
    bin_dir = str(Path(sys.executable).parent)  # the installed `cronjobs`, as the pages say
    env.update(CRONJOBS_DATABASE_URL=database_url, TZ="UTC", PYTHONUNBUFFERED="1",
               PATH=bin_dir + os.pathsep + env.get("PATH", ""))
    return env


def pages() -> list[str]:
    candidates = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in candidates if "```console" in p.read_text()]


def test_the_convention_finds_the_transcripts() -> None:
    assert {"README.md", "docs/tutorial.md"} <= set(pages())
    tutorial = steps((ROOT / "docs" / "tutorial.md").read_text())
    assert len(tutorial) >= 15
    assert [s.wait for s in tutorial if s.wait] == ["early-minute", "next-minute", "10s"]
    assert mask("2026-11-27 23:34 UTC (in 25 s)   x") == "YYYY-MM-DD hh:mm ZONE (…) x"
    assert mask("03:00 CEST (in 13 h)") == mask("03:00 CET (in 2 min)")


@pytest.mark.slow
@pytest.mark.parametrize("page", pages())
def test_shown_output_is_what_the_commands_print(page: str, database_url: str) -> None:
    env = environment(database_url)
    for step in steps((ROOT / page).read_text()):
        if step.wait:
            wait(step.wait)
        printed = run(step.command, env)
        assert mask(printed) == mask(step.shown), (
            f"{page}: `{step.command}` printed\n{printed}\nwhere the page shows\n{step.shown}")


if __name__ == "__main__":  # print what a page's commands print now
    url = os.environ["CRONJOBS_DATABASE_URL"]
    for step in steps((ROOT / sys.argv[1]).read_text()):
        if step.wait:
            wait(step.wait)
        print(f"$ {step.command}\n{run(step.command, environment(url))}", end="")
