"""The notification outbox: a webhook receiver that is down (refusing connections, or
answering 500) for several ticks and comes back gets the notification, with the same
Cronjobs-Delivery-Id every time, and it is recorded delivered once; the back-off between
rounds; the deadline (expired, and shown so); concurrent ticks (real processes) try a due
delivery once per round; a tick that died holding a claim; retention keeps what is pending;
`show` (text and --json) and the dashboard's run page say where each notification stands.
Time is pinned (`tick --now`), never slept through."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from conftest import Invoke, clean_env, one_run
from cronjobs.db.store import Store
from cronjobs.execution import notify
from cronjobs.models import DeliveryOutcome
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings

SECRET = "T0KEN-0utb0x"


class Receiver:
    """A webhook receiver on a fixed port: ``answer`` is the HTTP status it gives (set it to
    200 when it comes back); :meth:`stop` closes the port (connections are refused),
    :meth:`start` opens it again. Records each request's delivery id and body."""

    def __init__(self) -> None:
        self.answer = 500
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/hooks/{SECRET}"
        self.server: http.server.ThreadingHTTPServer | None = None
        self.start()

    def start(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    receiver.requests.append((self.headers["Cronjobs-Delivery-Id"], data))
                self.send_response(receiver.answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.server = server

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short waits between the tries of a round (the ticks run in-process)."""
    monkeypatch.setattr(notify, "TIMEOUT", 2.0)
    monkeypatch.setattr(notify, "FIRST_WAIT", 0.01)
    monkeypatch.setattr(notify, "MAX_WAIT", 0.02)


def _outbox(db: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    cursor = db.cursor(row_factory=psycopg.rows.dict_row)
    return cursor.execute(
        "SELECT id, run_id, status, rounds, tries, http_status, error, sent_at, delivery_id, "
        "next_attempt_at, expires_at, claim_token, url IS NOT NULL AS has_url, "
        "body IS NOT NULL AS has_body FROM job_notifications ORDER BY id").fetchall()


def _tick(cli: Invoke, at: dt.datetime, *options: str) -> None:
    result = cli("tick", "--now", at.isoformat(), "--allow-future", *options)
    assert result.exit_code == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr


def _dead_run_notified(cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver,
                       *tick_options: str) -> tuple[dict[str, Any], dt.datetime]:
    """A run that dies and whose notification the receiver did not take: (its delivery,
    the tick's instant)."""
    one_run(cli, "backup", "--command", "exit 3", "--max-attempts", "1",
            "--notify", receiver.url)
    row = db.execute("SELECT now()").fetchone()
    assert row is not None
    start = row[0]
    _tick(cli, start, *tick_options)
    (delivery,) = _outbox(db)
    return delivery, start


def test_a_receiver_down_for_several_ticks_gets_the_notice_when_it_comes_back(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, quick: None) -> None:
    receiver.stop()  # refusing connections
    delivery, start = _dead_run_notified(cli, db, receiver)
    assert receiver.requests == []
    assert (delivery["status"], delivery["rounds"], delivery["tries"]) == (
        "pending", 1, notify.TRIES)
    assert "refused" in delivery["error"].lower()
    assert delivery["claim_token"] is None and delivery["has_url"] and delivery["has_body"]
    day = dt.timedelta(hours=24)  # the default deadline
    assert start + day <= delivery["expires_at"] <= delivery["sent_at"] + day
    receiver.start()  # up again, but answering 500
    for rounds in range(2, 6):
        due = delivery["next_attempt_at"]
        # exponential back-off with jitter: 1, 2, 4, 8 minutes, times 0.5 to 1
        wait = due - delivery["sent_at"]
        base = dt.timedelta(minutes=2 ** (rounds - 2))
        assert base / 2 <= wait <= base, (rounds, wait)
        _tick(cli, due - dt.timedelta(seconds=1))  # not due yet: not tried
        assert _outbox(db)[0]["rounds"] == rounds - 1
        _tick(cli, due)
        (delivery,) = _outbox(db)
        assert (delivery["status"], delivery["rounds"], delivery["http_status"]) == (
            "pending", rounds, 500)
    assert len(receiver.requests) == 4 * notify.TRIES
    receiver.answer = 200  # back
    _tick(cli, delivery["next_attempt_at"])
    (delivery,) = _outbox(db)
    assert (delivery["status"], delivery["rounds"], delivery["tries"], delivery["http_status"],
            delivery["error"]) == ("sent", 6, 6 * notify.TRIES - 2, 200, None)
    assert (delivery["next_attempt_at"], delivery["expires_at"], delivery["has_url"],
            delivery["has_body"]) == (None, None, False, False)
    # every request carried the same idempotency key, in its header and its body
    ids = {key for key, _ in receiver.requests}
    assert ids == {str(delivery["delivery_id"])}
    assert {body["delivery_id"] for _, body in receiver.requests} == ids
    assert receiver.requests[-1][1]["event"] == "dead"
    # later ticks leave it alone
    _tick(cli, delivery["sent_at"] + dt.timedelta(hours=2))
    assert len(receiver.requests) == 4 * notify.TRIES + 1
    assert [d["status"] for d in _outbox(db)] == ["sent"]


def test_past_its_deadline_a_notice_expires_and_show_says_so(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, quick: None) -> None:
    delivery, start = _dead_run_notified(cli, db, receiver, "--notify-deadline", "10m")
    deadline = delivery["expires_at"]
    assert start + dt.timedelta(minutes=10) <= deadline <= (
        delivery["sent_at"] + dt.timedelta(minutes=10))
    shown = cli("show", str(delivery["run_id"]), "--utc")
    assert shown.exit_code == 0
    line = next(line for line in shown.stdout.splitlines() if "/***" in line)
    assert ": pending, 1 attempt (3 tries) so far, next attempt " in line
    assert line.endswith("; last error: HTTP 500")
    data = json.loads(cli("show", str(delivery["run_id"]), "--json").stdout)
    (n,) = data["notifications"]
    assert (n["status"], n["delivery_attempts"], n["tries"], n["delivered_at"]) == (
        "pending", 1, 3, None)
    assert dt.datetime.fromisoformat(n["next_attempt_at"]) == delivery["next_attempt_at"]
    assert dt.datetime.fromisoformat(n["expires_at"]) == delivery["expires_at"]
    assert n["delivery_id"] == str(delivery["delivery_id"])

    _tick(cli, start + dt.timedelta(hours=1))  # a try at or past the deadline is the last
    (delivery,) = _outbox(db)
    assert (delivery["status"], delivery["rounds"], delivery["next_attempt_at"],
            delivery["has_url"], delivery["has_body"]) == ("expired", 2, None, False, False)
    assert delivery["expires_at"] == deadline
    shown = cli("show", str(delivery["run_id"]))
    assert "expired " in shown.stdout
    assert "(given up at its deadline) after 2 attempts (6 tries); last error: HTTP 500" in (
        shown.stdout)
    n = json.loads(cli("show", str(delivery["run_id"]), "--json").stdout)["notifications"][0]
    assert (n["status"], n["error"], n["http_status"]) == ("expired", "HTTP 500", 500)
    requests = len(receiver.requests)
    _tick(cli, start + dt.timedelta(hours=30))
    assert len(receiver.requests) == requests  # given up: never tried again


def test_a_refusal_for_good_is_not_tried_again(cli: Invoke, db: psycopg.Connection[Any],
                                               receiver: Receiver, quick: None) -> None:
    receiver.answer = 410
    delivery, start = _dead_run_notified(cli, db, receiver)
    assert (delivery["status"], delivery["tries"], delivery["next_attempt_at"]) == (
        "failed", 1, None)
    _tick(cli, start + dt.timedelta(hours=1))
    assert len(receiver.requests) == 1
    assert "failed " in cli("show", str(delivery["run_id"])).stdout


def test_a_tick_that_died_holding_a_claim_leaves_it_to_a_later_tick(
        cli: Invoke, db: psycopg.Connection[Any], store: Store, receiver: Receiver,
        quick: None) -> None:
    delivery, _ = _dead_run_notified(cli, db, receiver)
    due = delivery["next_attempt_at"]
    # what a tick that claimed it and was killed leaves behind
    (claimed,) = store.notifications.claim_deliveries(
        now=due, claimed_until=due + notify.CLAIM, token=uuid.uuid4(), limit=10)
    assert claimed.id == delivery["id"] and claimed.url == receiver.url
    receiver.answer = 200
    _tick(cli, due + dt.timedelta(minutes=1))  # claimed: nobody else tries it
    assert len(receiver.requests) == notify.TRIES
    # the dead tick's late outcome is fenced off once another has claimed it
    _tick(cli, due + notify.CLAIM)
    assert [(d["status"], d["rounds"]) for d in _outbox(db)] == [("sent", 2)]
    late = store.notifications.finish_deliveries(
        [DeliveryOutcome(delivery["id"], False, True, 1, 500, "HTTP 500")],
        now=due + notify.CLAIM, token=uuid.uuid4())
    assert late == {}
    assert [(d["status"], d["rounds"]) for d in _outbox(db)] == [("sent", 2)]


def test_retention_keeps_what_is_pending(cli: Invoke, db: psycopg.Connection[Any],
                                         store: Store, receiver: Receiver, quick: None) -> None:
    delivery, start = _dead_run_notified(cli, db, receiver)
    far = start + dt.timedelta(days=400)
    assert store.retention.prune_notifications(cutoff=far, batch=100) == 0
    receiver.answer = 200
    _tick(cli, delivery["next_attempt_at"])
    assert _outbox(db)[0]["status"] == "sent"
    assert store.retention.prune_notifications(cutoff=far, batch=100) == 1


_TICK = """
import sys
from cronjobs.cli import run
sys.argv = ["cronjobs", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize("answer", [200, 500])
def test_concurrent_tick_processes_try_a_due_notice_once_per_round(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, database_url: str,
        quick: None, tmp_path: Path, answer: int) -> None:
    delivery, _ = _dead_run_notified(cli, db, receiver)
    before = len(receiver.requests)
    receiver.answer = answer
    at = delivery["next_attempt_at"].isoformat()
    env = clean_env(CRONJOBS_DATABASE_URL=database_url)
    ticks = [subprocess.Popen([sys.executable, "-c", _TICK, "tick", "--now", at,
                               "--allow-future"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outputs = [t.communicate(timeout=120) for t in ticks]
    assert [t.returncode for t in ticks] == [0] * 6, outputs
    assert all(SECRET not in out + err for out, err in outputs)
    tried = receiver.requests[before:]
    (row,) = _outbox(db)
    if answer == 200:
        assert len(tried) == 1
        assert (row["status"], row["rounds"]) == ("sent", 2)
    else:
        assert len(tried) == notify.TRIES  # one round, by one tick
        assert (row["status"], row["rounds"]) == ("pending", 2)
    assert {key for key, _ in receiver.requests} == {str(row["delivery_id"])}


def test_the_run_page_says_where_each_notice_stands(
        cli: Invoke, db: psycopg.Connection[Any], receiver: Receiver, database_url: str,
        quick: None) -> None:
    delivery, _ = _dead_run_notified(cli, db, receiver)
    app = create_app(Settings(conninfo=database_url))
    with TestClient(app, raise_server_exceptions=False) as web:
        page = web.get(f"/runs/{delivery['run_id']}")
        assert page.status_code == 200
        assert "<h2>Notifications</h2>" in page.text
        assert '<span class="badge s-pending">pending</span> dead (attempt 1)' in page.text
        assert "pending, 1 attempt (3 tries) so far, next attempt " in page.text
        assert "; last error: HTTP 500" in page.text
        assert SECRET not in page.text
        receiver.answer = 200
        _tick(cli, delivery["next_attempt_at"])
        page = web.get(f"/runs/{delivery['run_id']}")
        assert '<span class="badge s-sent">sent</span>' in page.text
        assert " after 4 tries in 2 attempts, HTTP 200" in page.text
