"""The real system cron daemon drives real ticks, from the lines of ``crontab.example``.

Debian's ``cron`` (installed by ``.ci/install-system-packages``; without it the test is
skipped, see ``tests/system_tools.py``) runs the lines of ``crontab.example`` against this
test's database, with the example's tick line twice, as two hosts with the same crontab
would; a ``* * * * *`` job records every slot it runs. It must run within two minutes of the
crontab being installed, then once per minute, one run per slot.

The example's lines are adapted only where they name this host's things: the database URL,
the virtualenv in ``PATH``, no ``CRONJOBS_APP`` (the example's module does not exist here),
and the monitoring line's ``*/5`` becomes ``* * * * *`` so that it fires within the test.
The monitoring line must reach a human: a job whose one run died makes ``status --check``
red, and its problem must arrive in syslog as an error tagged ``cronjobs``, as the ticks'
summaries arrive there as notices. To see what reaches syslog without depending on a syslog
daemon (a test machine or container usually has none, so no ``/dev/log``), ``PATH`` starts
with a directory holding a stand-in ``logger``: a one-line script that runs the real
``logger`` with the same arguments plus ``--socket`` naming a datagram socket this test
listens on, in place of ``/dev/log``. The messages the test reads are those the real
``logger`` sends. (The monitoring line's ``logger -s`` also prints them to stderr for cron
to mail; whether a mail goes out depends on the host having a mail transport, which a test
machine does not, so that part is not checked.)

Needs root: it adds an OS user, installs crontabs for it and starts the cron daemon when
none is running (the daemon it started is stopped at the end; a running one is used and
left alone). Skipped otherwise, like a missing tool.

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
import re
import shutil
import socket
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
from system_tools import require_root, require_tool

TEST_USER = "cronjobs-test"
BEGIN = "# >>> cronjobs acceptance test: removed when the test ends"
END = "# <<< cronjobs acceptance test"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MINUTE = timedelta(minutes=1)
EXAMPLE = ROOT / "crontab.example"
EXAMPLE_BIN = "/opt/cronjobs/venv/bin"  # the example's virtualenv; this test's replaces it
EVERY_MINUTE = ["*"] * 5
# syslog priorities (facility user = 1, times 8, plus the severity)
USER_ERR, USER_NOTICE = 8 + 3, 8 + 5
# what util-linux's logger sends to a local socket: "<PRI>Mmm dd hh:mm:ss TAG: MESSAGE"
SYSLOG_LINE = re.compile(r"<(\d+)>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (\S+?)(?:\[\d+\])?: (.*)",
                         re.DOTALL)


def _test_user() -> pwd.struct_passwd:
    """The unprivileged test user, created once (and kept: the next run reuses it)."""
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    result = subprocess.run(
        [require_tool("useradd", "passwd"), "--create-home", "--shell", "/bin/sh",
         "--comment", "cronjobs acceptance tests", TEST_USER],
        capture_output=True, text=True, check=False)
    try:  # a concurrent run may have created it first
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pytest.fail(f"could not create the test user {TEST_USER}: {result.stderr.strip()}")


def _example(path_head: str, database_url: str) -> tuple[dict[str, str], list[list[str]]]:
    """crontab.example's variables and lines (schedule fields, then the command), adapted
    to this test: its virtualenv in PATH replaced by ``path_head``, this test's database, no
    CRONJOBS_APP, the tick line twice and the monitoring line every minute."""
    environment: dict[str, str] = {}
    lines: list[list[str]] = []
    for raw in EXAMPLE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = line.partition("=")
        if equals and name.isidentifier():
            environment[name] = value
        else:
            fields = line.split(None, 5)
            assert len(fields) == 6, line
            lines.append(fields)
    assert environment["PATH"].startswith(f"{EXAMPLE_BIN}:"), environment["PATH"]
    environment["PATH"] = path_head + environment["PATH"].removeprefix(EXAMPLE_BIN)
    assert "CRONJOBS_DATABASE_URL" in environment
    environment["CRONJOBS_DATABASE_URL"] = database_url
    del environment["CRONJOBS_APP"]
    commands = [" ".join(fields[5].split()[:2]) for fields in lines]
    assert commands == ["cronjobs tick", "cronjobs status"], commands
    tick, check = lines
    assert tick[:5] == EVERY_MINUTE, tick
    assert check[:5] == ["*/5", "*", "*", "*", "*"], check
    return environment, [tick, tick, [*EVERY_MINUTE, check[5]]]


class _Syslog:
    """A datagram socket standing in for ``/dev/log``, and the messages it received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[tuple[int, str, str]] = []  # (priority, tag, message)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        path.chmod(0o666)  # the crontab's user sends to it
        self._socket.setblocking(False)

    def receive(self) -> list[tuple[int, str, str]]:
        """Every message received so far."""
        while True:
            try:
                datagram = self._socket.recv(65536).decode(errors="replace")
            except BlockingIOError:
                return self.messages
            match = SYSLOG_LINE.fullmatch(datagram.rstrip("\n"))
            assert match is not None, f"not a syslog message: {datagram!r}"
            self.messages.append((int(match[1]), match[2], match[3]))

    def close(self) -> None:
        self._socket.close()


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
    cron = require_tool("cron", "cron")
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


@pytest.fixture
def syslog(workdir: Path) -> Iterator[_Syslog]:
    listener = _Syslog(workdir / "syslog")
    yield listener
    listener.close()


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
                                                workdir: Path, syslog: _Syslog) -> None:
    crontab = require_tool("crontab", "cron")
    require_tool("cron", "cron")
    logger = require_tool("logger", "bsdutils")
    require_root("it adds an OS user, installs its crontab and starts the system cron daemon")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "cronjobs").exists(), f"no cronjobs executable next to {sys.executable}"
    stand_in = workdir / "bin"
    stand_in.mkdir()
    (stand_in / "logger").write_text(
        "#!/bin/sh\n# logger(1), sending to the test's socket instead of /dev/log\n"
        f'exec {logger} --socket {syslog.path} "$@"\n')
    (stand_in / "logger").chmod(0o755)
    stand_in.chmod(0o755)
    environment, schedule = _example(f"{stand_in}:{bin_dir}", database_url)
    assert not any("\n" in value for value in environment.values())
    probe_log = workdir / "probe.log"

    # Whose crontab: the test user's if it can run this virtualenv's cronjobs, else root's.
    user = _test_user()
    os.chown(workdir, user.pw_uid, user.pw_gid)
    probe = _as_user(user, f"cronjobs list >> {probe_log} 2>&1", environment)
    why = f"crontab of the unprivileged user {user.pw_name}"
    if probe.returncode != 0:
        problem = (probe.stderr.strip() or _tail(probe_log, 3)).replace("\n", " ")
        why = (f"crontab of root: {user.pw_name} cannot run {bin_dir / 'cronjobs'} "
               f"(exit {probe.returncode}: {problem})")
        user = pwd.getpwuid(0)
        os.chown(workdir, 0, 0)

    # Something for the monitoring line to report: a job whose one run died.
    broken = cli("define", "broken", "0 0 1 1 *", "--command", "exit 3", "--max-attempts", "1")
    assert broken.exit_code == 0, broken.stderr
    assert cli("trigger", "broken", "--run").exit_code == 0
    check = cli("status", "--check")
    assert check.exit_code == 3, check.stderr
    (problem,) = [line for line in check.stderr.splitlines() if "dead" in line]

    runs = workdir / "runs"
    defined = cli("define", "heartbeat", "* * * * *", "--command",
                  f'echo "$CRONJOBS_SCHEDULED_FOR" >> {runs}')
    assert defined.exit_code == 0, defined.stderr

    lines = [f"{name}={value}" for name, value in environment.items()]
    lines += [" ".join(fields) for fields in schedule]
    assert not any("%" in line for line in lines)  # cron would turn it into a newline

    daemon = "not started yet"

    def report(what: str) -> str:
        received = "\n".join(f"<{pri}> {tag}: {message}" for pri, tag, message
                             in syslog.receive()[-40:])
        return (f"{what} (ticks from the {why}; cron: {daemon})\n"
                f"runs: {_slots(runs)}\nsyslog:\n{received}\n"
                f"probe: {_tail(probe_log)}\n"
                f"cron daemon log:\n{_tail(workdir / 'cron-daemon.log')}")

    def summaries() -> list[tuple[int, str, str]]:
        return [m for m in syslog.receive() if m[2].startswith("tick: ")]

    def alerts() -> list[tuple[int, str, str]]:
        return [m for m in syslog.receive() if m[2] == problem]

    with contextlib.ExitStack() as stack:
        stack.enter_context(_crontab_block(crontab, user.pw_name, lines))
        installed_at = _db_now(db)
        daemon = stack.enter_context(_cron_daemon(workdir))
        print(f"ticks run from the {why}; cron: {daemon}")
        started = time.monotonic()
        # cron fires at second 0 of every minute and rereads crontabs first: the first tick
        # comes at the next minute, the second one a minute later; the monitoring line
        # fires with each.
        while len(set(_slots(runs))) < 2 or not alerts():
            waited = time.monotonic() - started
            if not _slots(runs) and waited > 135:
                pytest.fail(report("no run within two minutes of installing the crontab"))
            if waited > 195:
                pytest.fail(report("fewer than two slots ran, or the monitoring line did not "
                                   "reach syslog, within three minutes"))
            time.sleep(0.5)
    # The crontab is gone and a daemon started here is stopped (mid-minute, far from the next
    # firing): let the ticks cron started finish before looking at what they did, and what
    # they and the monitoring line said reach syslog.
    slots = sorted(set(_slots(runs)))
    minutes = len(slots)
    deadline = time.monotonic() + 60
    while (db.execute("SELECT count(*) FILTER (WHERE status = 'finished') < %s "
                      "OR bool_or(status = 'running') FROM job_ticks WHERE tick_at >= %s",
                      (2 * minutes, installed_at)).fetchone() != (False,)
           or len(summaries()) < 2 * minutes or len(alerts()) < minutes):
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
        "JOIN job_definitions d ON d.id = r.definition_id AND d.name = 'heartbeat' "
        "LEFT JOIN job_attempts a ON a.run_id = r.id GROUP BY 1 ORDER BY 1").fetchall() == [
        (slot, 1, True, True, 1) for slot in slots], report("runs in the database")
    first = db.execute("SELECT min(a.started_at) FROM job_attempts a JOIN job_runs r "
                       "ON r.id = a.run_id AND r.trigger = 'schedule'").fetchone()
    assert first is not None
    assert first[0] - installed_at <= 2 * MINUTE, \
        report(f"the first run started {first[0] - installed_at} after the crontab went in")
    assert db.execute("SELECT r.status, count(*) FROM job_runs r JOIN job_definitions d "
                      "ON d.id = r.definition_id AND d.name = 'broken' GROUP BY 1"
                      ).fetchall() == [("dead", 1)], report("the broken job's runs")

    # Both lines ticked every minute, as two processes; each minute's slot ran once.
    assert db.execute(
        "SELECT date_trunc('minute', tick_at), count(*), count(DISTINCT worker), "
        "bool_and(status = 'finished'), sum(materialised), sum(claimed), sum(succeeded) "
        "FROM job_ticks WHERE tick_at >= %s GROUP BY 1 ORDER BY 1", (installed_at,)
    ).fetchall() == [(slot, 2, 2, True, 1, 1, 1) for slot in slots], report("ticks per minute")

    # What reached syslog: every tick's summary, as a notice, and the monitoring line's
    # problem, as an error, from every minute (cron fires it with the ticks).
    assert [(pri, tag) for pri, tag, _ in summaries()] == [(USER_NOTICE, "cronjobs")] * (
        2 * minutes), report("tick summaries in syslog")
    assert [(pri, tag) for pri, tag, _ in alerts()] == [(USER_ERR, "cronjobs")] * minutes, \
        report("the monitoring line's problem in syslog")
