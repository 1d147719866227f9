"""Webhook notifications, against a real receiver on 127.0.0.1 and a real PostgreSQL: the
body, retries through a failing receiver, slow and unreachable receivers that never hold a
run up, recovery, every delivery recorded and shown, URLs masked everywhere."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Invoke, count, one_run, run_cronjobs, snapshot
from cronjobs.execution import notify
from cronjobs.validation import mask_url

SECRET = "T0KEN-s3cr3t"


class Receiver:
    """A webhook receiver: answers ``fail`` requests with HTTP 500 first, then 200; waits
    ``delay`` seconds before answering."""

    def __init__(self, fail: int = 0, delay: float = 0.0, status: int = 200) -> None:
        self.fail = fail
        self.delay = delay
        self.bodies: list[dict[str, Any]] = []
        self.answers: list[int] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.delay:
                    time.sleep(receiver.delay)
                code = 500 if len(receiver.answers) < receiver.fail else status
                receiver.bodies.append(json.loads(data))
                receiver.answers.append(code)
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{SECRET}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail=2)
    yield r
    r.close()


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short tries and waits, so that giving up takes a moment (the tick runs in-process)."""
    monkeypatch.setattr(notify, "TIMEOUT", 1.0)
    monkeypatch.setattr(notify, "FIRST_WAIT", 0.05)
    monkeypatch.setattr(notify, "MAX_WAIT", 0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _deliveries(db: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return db.execute("SELECT run_id, attempt, event, target, status, tries, http_status, "
                      "error FROM job_notifications ORDER BY id").fetchall()


def _run_id(db: psycopg.Connection[Any], job: str) -> int:
    row = db.execute("SELECT r.id FROM job_runs r JOIN job_definitions d "
                     "ON d.id = r.definition_id WHERE d.name = %s ORDER BY r.id DESC LIMIT 1",
                     (job,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_dead_run_is_posted_through_a_receiver_that_fails_twice(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver) -> None:
    one_run(cli, "backup", "--command", "echo one; echo two; echo 'disk full' >&2; exit 3",
            "--max-attempts", "1", "--notify", receiver.url)
    result = cli("tick", "-v", "--dashboard-url", "https://cron.example.com/")
    assert result.exit_code == 0, result.stderr
    run_id = _run_id(db, "backup")
    assert receiver.answers == [500, 500, 200]
    body = receiver.bodies[-1]
    assert body == receiver.bodies[0]  # every try sends the same document
    assert {k: body[k] for k in ("event", "job", "run_id", "scheduled_for", "attempt",
                                 "max_attempts", "status", "error", "exit_code",
                                 "output_tail", "url")} == {
        "event": "dead", "job": "backup", "run_id": run_id,
        "scheduled_for": "2020-01-01T00:00:00+00:00", "attempt": 1, "max_attempts": 1,
        "status": "dead", "error": "exit code 3", "exit_code": 3,
        "output_tail": ["one", "two", "disk full"],
        "url": f"https://cron.example.com/runs/{run_id}"}
    assert body["text"].startswith(":red_circle: cronjobs: job `backup` is dead: "
                                   f"run {run_id} (slot 2020-01-01 00:00 UTC)")
    assert "disk full" in body["text"]
    assert f"<https://cron.example.com/runs/{run_id}|Open run {run_id}>" in body["text"]
    masked = mask_url(receiver.url)
    assert _deliveries(db) == [(run_id, 1, "dead", masked, "sent", 3, 200, None)]
    assert SECRET not in result.stdout + result.stderr

    shown = cli("show", str(run_id))
    assert shown.exit_code == 0
    (line,) = [line for line in shown.stdout.splitlines() if "to " + masked in line]
    assert line.startswith(f"  dead (attempt 1) to {masked}: sent ")
    assert line.endswith(" after 3 tries, HTTP 200")
    data = json.loads(cli("show", str(run_id), "--json").stdout)
    assert [(n["event"], n["status"], n["tries"], n["delivery_attempts"], n["target"],
             n["next_attempt_at"], n["expires_at"]) for n in data["notifications"]
            ] == [("dead", "sent", 3, 1, masked, None, None)]
    assert data["notifications"][0]["delivered_at"] == data["notifications"][0]["sent_at"]


def test_urls_are_masked_in_every_output(cli: Invoke, receiver: Receiver) -> None:
    url = receiver.url + "?token=" + SECRET + "#frag"
    defined = cli("define", "backup", "@daily", "--command", "true", "--notify", url,
                  "--notify", "https://user:pw-" + SECRET + "@hooks.example.com/x")
    assert defined.exit_code == 0, defined.stderr
    outputs = [defined.stdout, defined.stderr]
    job = json.loads(cli("describe", "backup", "--json").stdout)["job"]
    assert job["notify"] == [mask_url(url), "https://hooks.example.com/***"]
    for args in (["describe", "backup"], ["describe", "backup", "--json"], ["list", "--json"],
                 ["list"], ["define", "backup", "@daily", "--command", "true", "--notify",
                            url, "--json"]):
        result = cli(*args)
        assert result.exit_code == 0, (args, result.stderr)
        outputs += [result.stdout, result.stderr]
    assert all(SECRET not in text and "pw-" not in text for text in outputs)
    assert job["notify_on"] == ["dead", "recovery"]
    assert mask_url(url).endswith("/***") and "127.0.0.1" in mask_url(url)


@pytest.mark.parametrize("url", ["ftp://example.com/" + SECRET, "file:///" + SECRET,
                                 "javascript:" + SECRET, "https:///" + SECRET,
                                 "https://example.com:99999/" + SECRET,
                                 "https://exa mple.com/" + SECRET,
                                 "https://" + SECRET + ".example.com/***"])
def test_a_bad_url_is_refused_without_quoting_it(cli: Invoke, db: psycopg.Connection[Any],
                                                 url: str) -> None:
    before = snapshot(db)
    result = cli("define", "backup", "@daily", "--command", "true", "--notify", url)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: invalid --notify")
    assert SECRET not in result.stderr
    assert snapshot(db) == before


def test_a_slow_receiver_never_holds_up_the_next_run(
        cli: Invoke, db: psycopg.Connection[Any], quick: None) -> None:
    slow = Receiver(delay=3.0)  # longer than a try may take
    try:
        one_run(cli, "first", "--command", "exit 1", "--max-attempts", "1",
                "--notify", slow.url)
        one_run(cli, "second", "--command", "echo done")
        result = cli("tick", "--concurrency", "1")
        assert result.exit_code == 0, result.stderr
    finally:
        slow.close()
    first, second = _run_id(db, "first"), _run_id(db, "second")
    rows = db.execute("SELECT id, status FROM job_runs ORDER BY id").fetchall()
    assert rows == [(first, "dead"), (second, "succeeded")]
    (delivery,) = _deliveries(db)
    # a timeout may do better later: the notification stays in the outbox
    assert delivery[:6] == (first, 1, "dead", mask_url(slow.url), "pending", notify.TRIES)
    assert delivery[7] == "timed out"
    # the second run started and ended while the first one's notification was being tried
    started = db.execute("SELECT started_at, finished_at FROM job_attempts WHERE run_id = %s",
                         (second,)).fetchone()
    sent = db.execute("SELECT sent_at FROM job_notifications").fetchone()
    assert started is not None and sent is not None
    assert started[1] < sent[0]


def test_an_unreachable_receiver_costs_one_bounded_series(
        cli: Invoke, db: psycopg.Connection[Any], quick: None) -> None:
    url = f"http://127.0.0.1:{_free_port()}/hooks/{SECRET}"
    one_run(cli, "backup", "--command", "exit 1", "--max-attempts", "1", "--notify", url)
    result = cli("tick", "-v")
    assert result.exit_code == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    (delivery,) = _deliveries(db)
    assert delivery[4:7] == ("pending", notify.TRIES, None)  # in the outbox, tried later
    assert "refused" in delivery[7].lower()
    assert count(db, "job_runs") == 1
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("dead",)
    shown = cli("show", str(delivery[0]))
    assert f"pending, 1 attempt ({notify.TRIES} tries) so far, next attempt " in shown.stdout
    assert SECRET not in shown.stdout


def test_a_client_error_is_not_retried(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    gone = Receiver(status=404)  # the hook was deleted: trying again will not help
    try:
        one_run(cli, "backup", "--command", "exit 1", "--max-attempts", "1",
                "--notify", gone.url)
        assert cli("tick").exit_code == 0
    finally:
        gone.close()
    assert gone.answers == [404]
    (delivery,) = _deliveries(db)
    assert delivery[4:8] == ("failed", 1, 404, "HTTP 404")


def test_recovery_after_a_dead_run(cli: Invoke, db: psycopg.Connection[Any],
                                   tmp_path: Path) -> None:
    ok = Receiver()
    marker = tmp_path / "fixed"
    try:
        one_run(cli, "backup", "--command", f"test -f {marker}", "--max-attempts", "1",
                "--notify", ok.url)
        assert cli("tick").exit_code == 0
        marker.touch()
        assert cli("backfill", "--yes", "backup", "--from", "2021-01-01T00:00:00Z",
                   "--to", "2021-01-01T00:00:00Z").exit_code == 0
        assert cli("tick").exit_code == 0
        # a third run that succeeds after a success is no news
        assert cli("backfill", "--yes", "backup", "--from", "2022-01-01T00:00:00Z",
                   "--to", "2022-01-01T00:00:00Z").exit_code == 0
        assert cli("tick").exit_code == 0
    finally:
        ok.close()
    assert [(b["event"], b["status"]) for b in ok.bodies] == [("dead", "dead"),
                                                              ("recovery", "succeeded")]
    assert ok.bodies[1]["text"].startswith(":large_green_circle: cronjobs: job `backup` "
                                           "recovered")
    assert [d[2:5] for d in _deliveries(db)] == [("dead", mask_url(ok.url), "sent"),
                                                 ("recovery", mask_url(ok.url), "sent")]


def test_failure_then_recovery_within_one_run(cli: Invoke, db: psycopg.Connection[Any],
                                              tmp_path: Path) -> None:
    ok = Receiver()
    marker = tmp_path / "tried"
    try:
        one_run(cli, "flaky", "--command", f"test -f {marker} || {{ touch {marker}; exit 1; }}",
                "--max-attempts", "2", "--backoff", "1s", "--notify", ok.url,
                "--notify-on", "failure", "--notify-on", "recovery")
        assert cli("tick").exit_code == 0
        time.sleep(1.1)  # the retry's backoff (at most 1s) passes
        assert cli("tick").exit_code == 0
    finally:
        ok.close()
    assert [(b["event"], b["status"], b["attempt"]) for b in ok.bodies] == [
        ("failure", "failed", 1), ("recovery", "succeeded", 2)]
    assert "a retry follows" in ok.bodies[0]["text"]


def test_no_notification_unless_asked(cli: Invoke, db: psycopg.Connection[Any]) -> None:
    ok = Receiver()
    try:
        # failures only: a success is not news, and a job without --notify sends nothing
        one_run(cli, "quiet", "--command", "true", "--notify", ok.url, "--notify-on",
                "failure")
        one_run(cli, "silent", "--command", "exit 1", "--max-attempts", "1")
        assert cli("tick").exit_code == 0
    finally:
        ok.close()
    assert ok.bodies == []
    assert count(db, "job_notifications") == 0


def test_notify_options_round_trip(cli: Invoke) -> None:
    base = ["define", "backup", "@daily", "--command", "true"]
    first = cli(*base, "--notify", "https://a.example.com/x", "--notify-on", "dead,failure")
    assert first.exit_code == 0, first.stderr
    assert json.loads(cli(*base, "--notify", "https://a.example.com/x", "--notify-on",
                          "failure", "--notify-on", "dead", "--json").stdout)["outcome"] == (
        "unchanged")
    # an option left out of a define of a job that exists keeps its value; --reset clears
    assert json.loads(cli(*base, "--json").stdout)["outcome"] == "unchanged"
    job = json.loads(cli(*base, "--reset", "notify,notify-on", "--json").stdout)
    assert job["outcome"] == "updated"
    assert job["job"]["notify"] == [] and job["job"]["notify_on"] == ["dead", "recovery"]
    too_many = [arg for i in range(11) for arg in ("--notify", f"https://h{i}.example.com/")]
    result = cli(*base, *too_many)
    assert result.exit_code == 2 and "at most 10" in result.stderr


def test_mask_url() -> None:
    assert mask_url("https://hooks.slack.com/services/T0/B0/XYZ") == (
        "https://hooks.slack.com/***")
    assert mask_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert mask_url("https://u:p@h.example.com/") == "https://h.example.com/***"
    assert mask_url("https://h.example.com/?k=v") == "https://h.example.com/***"
    assert mask_url("http://[::1]:9/x") == "http://[::1]:9/***"
    assert mask_url("https://h:bad/x") == "***"


def test_a_real_tick_process_drains_its_deliveries_before_it_exits(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, database_url: str) -> None:
    one_run(cli, "backup", "--command", "exit 1", "--max-attempts", "1", "--notify",
            receiver.url)
    result = run_cronjobs("--database-url", database_url, "tick", "-v")
    assert result.returncode == 0, result.stderr
    assert receiver.answers == [500, 500, 200]
    assert [d[4:7] for d in _deliveries(db)] == [("sent", 3, 200)]
    assert SECRET not in result.stdout + result.stderr
    assert "notification of run" in result.stderr  # logged, masked
