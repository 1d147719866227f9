"""--concurrency auto: the sizing rule at its edges (cronjobs/execution/sizing.py), and the
option that reads it."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from cronjobs.cli import main_group
from cronjobs.cli.ticking import Concurrency
from cronjobs.execution.sizing import (
    FLOOR,
    MAX_THREADS,
    Backlog,
    auto_concurrency,
    process_cap,
    thread_cap,
)


@pytest.mark.parametrize(("threads", "processes", "cores", "expected"), [
    (0, 0, 2, FLOOR),  # nothing due: the floor, for what comes due while the tick runs
    (1, 0, 2, FLOOR),
    (FLOOR, 0, 2, FLOOR),
    (FLOOR + 1, 0, 2, FLOOR + 1),  # one slot per due run
    (127, 0, 2, 127),
    (128, 0, 2, 128),  # 64 threads per core
    (129, 0, 2, 128),
    (10_000, 0, 2, 128),
    (10_000, 0, 1, 64),
    (10_000, 0, 4, 256),
    (10_000, 0, 8, 256),
    (10_000, 0, 64, MAX_THREADS),  # never more than --concurrency's maximum
    (0, 4, 2, 4),  # processes within their cap (2 per core, at least 4) count as slots
    (0, 5, 2, 4),  # more than the cap: the cap
    (0, 5, 1, FLOOR),  # at least the floor, on one core too
    (0, 16, 8, 16),
    (0, 17, 8, 16),
    (0, 10_000, 200, MAX_THREADS),
    (100, 4, 2, 104),  # a few processes among many threads: at most those few processes
    (200, 4, 2, 128),
    (100, 5, 2, 4),  # more processes than their cap: the claim may take any, so the cap
    (3, 3, 4, 6),
])
def test_the_rule(threads: int, processes: int, cores: int, expected: int) -> None:
    assert auto_concurrency(Backlog(threads=threads, processes=processes),
                            cores=cores) == expected


def test_the_caps() -> None:
    assert [thread_cap(c) for c in (1, 2, 4, 8, 16)] == [64, 128, 256, 256, 256]
    assert [process_cap(c) for c in (1, 2, 3, 4, 64, 200)] == [4, 4, 6, 8, 128, 256]


def test_the_run_mode_decides_what_a_handler_costs() -> None:
    assert Backlog.of(handlers=10, commands=2, in_process=True) == Backlog(10, 2)
    assert Backlog.of(handlers=10, commands=2, in_process=False) == Backlog(0, 12)
    # 200 isolated handlers due on 2 cores: 4 processes, not 128
    assert auto_concurrency(Backlog.of(handlers=200, commands=0, in_process=False),
                            cores=2) == 4
    assert auto_concurrency(Backlog.of(handlers=200, commands=0, in_process=True),
                            cores=2) == 128


@pytest.mark.parametrize(("text", "value"), [
    ("auto", None), ("AUTO", None), (" auto ", None), ("1", 1), ("64", 64),
    (str(MAX_THREADS), MAX_THREADS)])
def test_the_option_reads_auto_or_a_number(text: str, value: int | None) -> None:
    assert Concurrency().convert(text, None, None) == value


@pytest.mark.parametrize(("text", "message"), [
    ("0", "0 is not auto or a number from 1 to 256"),
    ("257", "257 is not auto or a number from 1 to 256"),
    ("-3", "-3 is not auto or a number from 1 to 256"),
    ("lots", "'lots' is neither auto nor a number of runs"),
    ("", "'' is neither auto nor a number of runs"),
])
def test_the_option_refuses_anything_else(text: str, message: str) -> None:
    with pytest.raises(click.BadParameter, match=re.escape(message)):
        Concurrency().convert(text, None, None)


def test_auto_is_the_default_and_help_says_so() -> None:
    result = CliRunner().invoke(main_group, ["tick", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "--concurrency auto|N" in result.stdout
    assert "[env var: CRONJOBS_TICK_CONCURRENCY; default: auto]" in " ".join(
        result.stdout.split())
