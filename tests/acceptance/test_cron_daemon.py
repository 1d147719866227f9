"""The real system cron daemon drives real ticks.

Debian's ``cron`` (installed by ``.ci/install-system-packages``) runs two identical
``* * * * * cronjobs tick`` lines, as two hosts with the same crontab would, against this
test's database; a ``* * * * *`` job records every slot it runs. It must run within two
minutes of the crontab being installed, then once per minute, one run per slot.

Needs root: it adds an OS user, installs crontabs for it and starts the cron daemon when
none is running (the daemon it started is stopped at the end; a running one is used and
left alone).

Whose crontab: the lines go into the crontab of a dedicated unprivileged user,
``cronjobs-test``, when that user can run this virtualenv's ``cronjobs`` executable, which the
test checks by running ``cronjobs list`` as that user with the environment cron gives it. A
virtualenv whose interpreter lives under a home directory closed to other users (pyenv's
``~/.pyenv`` under a ``0700`` ``/root``, say) cannot be run by any other
user, and opening that directory up is not a test's business: the lines then go into root's
crontab instead. Either way they are appended to the user's crontab between two marker
comments and taken out again at the end, so lines already there keep running and are
restored as they were (a block left behind by a killed run is dropped on the next run).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import ROOT, Invoke

TEST_USER = "cronjobs-test"
BEGIN = "# >>> cronjobs acceptance test: removed when the test ends"
END = "# <<< cronjobs acceptance test"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL = ROOT / ".ci" / "install-system-packages"
MINUTE = timedelta(minutes=1)


def _system_binary(name: str) -> str:
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}")
    if found is None:
        pytest.fail(f"`{name}` is not installed: run {INSTALL.relative_to(ROOT)} (as root) "
                    "to install the system cron daemon and the tools this test needs")
    return found


def _test_user() -> pwd.struct_passwd:
    """The unprivileged test user, created once (and kept: the next run reuses it)."""
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    result = subprocess.run(
        [_system_binary("useradd"), "--create-home", "--shell", "/bin/sh",
         "--comment", "cronjobs acceptance tests", TEST_USER],
        capture_output=True, text=True, check=False)
    try:  # a concurrent run may have created it first
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pytest.fail(f"could not create the test user {TEST_USER}: {result.stderr.strip()}")


def _cron_environment(bin_dir: Path, database_url: str) -> dict[str, str]:
    """The variables the crontab sets, as crontab.example does."""
    return {"SHELL": "/bin/sh", "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "CRONJOBS_DATABASE_URL": database_url, "MAILTO": ""}


def _as_user(user: pwd.struct_passwd, command: str, env: dict[str, str]
             ) -> subprocess.CompletedProcess[str]:
    """Run a shell command as `user` with only the environment cron would give it."""
    full_env = {**env, "HOME": user.pw_dir, "LOGNAME": user.pw_name, "USER": user.pw_name}
    full_env.pop("MAILTO", None)
    return subprocess.run(["/bin/sh", "-c", command], user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], env=full_env, cwd=user.pw_dir, capture_output=True,
                          text=True, timeout=60, check=False)


def _read_crontab(crontab: str, user: str) -> str:
    result = subprocess.run([crontab, "-u", user, "-l"], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        assert "no crontab" in result.stderr, result.stderr
        return ""
    return result.stdout


def _without_block(text: str) -> str:
    kept: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == BEGIN:
            inside = True
        elif inside and line.rstrip("\n") == END:
            inside = False
        elif not inside:
            kept.append(line)
    return "".join(kept)


def _write_crontab(crontab: str, user: str, text: str) -> None:
    if text.strip():
        result = subprocess.run([crontab, "-u", user, "-"], input=text, capture_output=True,
                                text=True, check=False)
    else:
        result = subprocess.run([crontab, "-u", user, "-r"], capture_output=True, text=True,
                                check=False)
        if "no crontab" in result.stderr:
            return
    assert result.returncode == 0, f"crontab -u {user}: {result.stderr}"


@contextlib.contextmanager
def _crontab_block(crontab: str, user: str, lines: list[str]) -> Iterator[None]:
    """`lines` appended to `user`'s crontab between markers; the crontab restored after."""
    original = _without_block(_read_crontab(crontab, user))
    if original and not original.endswith("\n"):
        original += "\n"
    _write_crontab(crontab, user, original + "\n".join([BEGIN, *lines, END]) + "\n")
    try:
        yield
    finally:
        _write_crontab(crontab, user, original)


@contextlib.contextmanager
def _cron_daemon(workdir: Path) -> Iterator[str]:
    """A running cron daemon: one started here (and stopped at the end), or, when cron says
    that one is running already (it holds the lock on its pid file), that one, left alone."""
    cron = _system_binary("cron")
    log = workdir / "cron-daemon.log"
    with log.open("w") as out:
        daemon = subprocess.Popen([cron, "-f"], stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True,
                                  env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"})
    try:
        time.sleep(1)
        if daemon.poll() is None:
            yield f"{cron} -f started by this test (pid {daemon.pid})"
            return
        said = log.read_text().strip()
        if "can't lock" not in said:
            pytest.fail(f"{cron} -f exited with {daemon.returncode}: {said}")
        yield f"the cron daemon already running ({said})"
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory outside pytest's private tmp tree, which other users cannot enter."""
    path = Path(tempfile.mkdtemp(prefix="cronjobs-cron-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _slots(file: Path) -> list[datetime]:
    if not file.exists():
        return []
    return [datetime.fromisoformat(line) for line in file.read_text().split()]


def _tail(file: Path, lines: int = 40) -> str:
    if not file.exists():
        return f"({file.name}: nothing written)"
    return "\n".join(file.read_text(errors="replace").splitlines()[-lines:])


def _db_now(db: psycopg.Connection[Any]) -> datetime:
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


@pytest.mark.slow
def test_system_cron_drives_ticks_once_per_slot(cli: Invoke, database_url: str,
                                                db: psycopg.Connection[Any],
                                                workdir: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test must run as root: it adds an OS user, installs its crontab "
                    "and starts the system cron daemon")
    crontab = _system_binary("crontab")
    _system_binary("cron")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "cronjobs").exists(), f"no cronjobs executable next to {sys.executable}"
    environment = _cron_environment(bin_dir, database_url)
    assert not any("\n" in value for value in environment.values())
    log = workdir / "tick.log"

    # Whose crontab: the test user's if it can run this virtualenv's cronjobs, else root's.
    user = _test_user()
    os.chown(workdir, user.pw_uid, user.pw_gid)
    probe = _as_user(user, f"cronjobs list >> {log} 2>&1", environment)
    why = f"crontab of the unprivileged user {user.pw_name}"
    if probe.returncode != 0:
        problem = (probe.stderr.strip() or _tail(log, 3)).replace("\n", " ")
        why = (f"crontab of root: {user.pw_name} cannot run {bin_dir / 'cronjobs'} "
               f"(exit {probe.returncode}: {problem})")
        user = pwd.getpwuid(0)
        os.chown(workdir, 0, 0)

    runs = workdir / "runs"
    defined = cli("define", "heartbeat", "* * * * *", "--command",
                  f'echo "$CRONJOBS_SCHEDULED_FOR" >> {runs}')
    assert defined.exit_code == 0, defined.stderr

    # Two hosts' worth of the same crontab: two identical lines.
    tick_line = f"* * * * * cronjobs tick >> {log} 2>&1"
    assert "%" not in tick_line  # cron would turn it into a newline
    lines = [f"{name}={value}" if value else f'{name}=""'
             for name, value in environment.items()]
    lines += [tick_line, tick_line]

    daemon = "not started yet"

    def report(what: str) -> str:
        return (f"{what} (ticks from the {why}; cron: {daemon})\n"
                f"runs: {_slots(runs)}\ntick log:\n{_tail(log)}\n"
                f"cron daemon log:\n{_tail(workdir / 'cron-daemon.log')}")

    with contextlib.ExitStack() as stack:
        stack.enter_context(_crontab_block(crontab, user.pw_name, lines))
        installed_at = _db_now(db)
        daemon = stack.enter_context(_cron_daemon(workdir))
        print(f"ticks run from the {why}; cron: {daemon}")
        started = time.monotonic()
        # cron fires at second 0 of every minute and rereads crontabs first: the first tick
        # comes at the next minute, the second one a minute later.
        while len(set(_slots(runs))) < 2:
            waited = time.monotonic() - started
            if not _slots(runs) and waited > 135:
                pytest.fail(report("no run within two minutes of installing the crontab"))
            if waited > 195:
                pytest.fail(report("fewer than two slots ran within three minutes"))
            time.sleep(0.5)
    # The crontab is gone and a daemon started here is stopped (mid-minute, far from the next
    # firing): let the ticks cron started finish before looking at what they did.
    slots = sorted(set(_slots(runs)))
    minutes = len(slots)
    deadline = time.monotonic() + 60
    while db.execute("SELECT count(*) FILTER (WHERE status = 'finished') < %s "
                     "OR bool_or(status = 'running') FROM job_ticks",
                     (2 * minutes,)).fetchone() != (False,):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)

    ran = _slots(runs)
    assert set(Counter(ran).values()) == {1}, report("a slot ran more than once")
    assert all(slot.second == 0 and slot.microsecond == 0 for slot in slots), report("slots")
    assert [b - a for a, b in pairwise(slots)] == [MINUTE] * (minutes - 1), \
        report("the slots are not consecutive minutes")
    assert slots[0] - installed_at <= 2 * MINUTE, report("the first slot came too late")

    assert db.execute(
        "SELECT r.scheduled_for, count(DISTINCT r.id), bool_and(r.status = 'succeeded'), "
        "bool_and(r.trigger = 'schedule'), count(a.id) FROM job_runs r "
        "LEFT JOIN job_attempts a ON a.run_id = r.id GROUP BY 1 ORDER BY 1").fetchall() == [
        (slot, 1, True, True, 1) for slot in slots], report("runs in the database")
    first = db.execute("SELECT min(started_at) FROM job_attempts").fetchone()
    assert first is not None
    assert first[0] - installed_at <= 2 * MINUTE, \
        report(f"the first run started {first[0] - installed_at} after the crontab went in")

    # Both lines ticked every minute, as two processes; each minute's slot ran once.
    assert db.execute(
        "SELECT date_trunc('minute', tick_at), count(*), count(DISTINCT worker), "
        "bool_and(status = 'finished'), sum(materialised), sum(claimed), sum(succeeded) "
        "FROM job_ticks GROUP BY 1 ORDER BY 1").fetchall() == [
        (slot, 2, 2, True, 1, 1, 1) for slot in slots], report("ticks per minute")
