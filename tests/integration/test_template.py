"""The template process as a fence (no database): it kills every job group it was told
about when the tick's end of the socket goes away (the tick killed with SIGKILL), and a
group whose deadline passes unrenewed, as the watchdog does. (Handler runs forked from it
are tested with the runner's handler tests, in tests/integration/test_runner.py, and with
real ticks in tests/acceptance/test_isolation.py.)"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from conftest import alive, group_members, wait_for
from cronjobs.execution.runners.template import Template

SAFETY = 60.0

TICK = """
import subprocess, sys, time
from cronjobs.execution.runners.template import Template
template = Template(())
job = subprocess.Popen(["/bin/sh", "-c", "sleep 300 & sleep 300 & wait"],
                       start_new_session=True)
template.line(f"watch {job.pid}".encode())
template.flush()
print(job.pid, template.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def tick() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-c", TICK], stdout=subprocess.PIPE, text=True)
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_the_template_kills_the_groups_of_a_killed_tick(tick: subprocess.Popen[str]) -> None:
    assert tick.stdout is not None
    job, template = map(int, tick.stdout.readline().split())
    wait_for(lambda: len(group_members(job)) == 3, "the job's three processes started", 15)
    tick.kill()  # no watchdog here: only the template is left to fence the job
    tick.wait()
    wait_for(lambda: not group_members(job), f"process group {job} is gone", 15)
    wait_for(lambda: not alive(template), "the template exited", 15)
    assert group_members(job) == []


def test_the_template_kills_a_group_whose_deadline_passed() -> None:
    job = subprocess.Popen(["sleep", "300"], start_new_session=True)
    template = Template(())
    try:
        template.line(f"watch {job.pid} {time.monotonic() + 0.5:.3f}".encode())
        template.flush()
        assert job.wait(SAFETY) == -9
        assert template.pid is not None and alive(template.pid)
    finally:
        template.close()
        if job.poll() is None:
            job.kill()
            job.wait()


def test_a_closed_template_leaves_forgotten_groups_alone() -> None:
    job = subprocess.Popen(["sleep", "300"], start_new_session=True)
    template = Template(())
    try:
        pid = template.pid
        assert pid is not None
        template.line(f"watch {job.pid}".encode())
        template.line(f"forget {job.pid}".encode())
        template.close()
        template.close()
        wait_for(lambda: not alive(pid), "the template exited", 15)
        assert job.poll() is None
    finally:
        job.kill()
        job.wait()
