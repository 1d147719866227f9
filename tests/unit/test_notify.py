"""The notification sender on its own: the body, the chat text, and a tick that ends
while receivers still hang (bounded, and every notice accounted for)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid

from cronjobs.execution.notify import Notice, Notifier, body, document
from cronjobs.models import Outgoing

NOW = dt.datetime(2026, 11, 24, 2, 0, 41, tzinfo=dt.UTC)


def _notice(run_id: int = 1234, event: str = "dead", status: str = "dead") -> Notice:
    return Notice(event, run_id, "backup", dt.datetime(2026, 11, 24, 2, tzinfo=dt.UTC), 3, 3,
                  status, "exit code 1", 1,
                  "".join(f"line {i}\n" for i in range(30)) + "x" * 600 + "\n",
                  f"https://cron.example.com/runs/{run_id}")


def test_the_body() -> None:
    data = body(_notice(), NOW)
    assert data["output_tail"][:2] == ["line 11", "line 12"]
    assert len(data["output_tail"]) == 20
    assert data["output_tail"][-1] == "x" * 497 + "..."
    assert data["sent_at"] == "2026-11-24T02:00:41+00:00"
    assert data["scheduled_for"] == "2026-11-24T02:00:00+00:00"
    text = data["text"]
    assert text.splitlines()[0] == (
        ":red_circle: cronjobs: job `backup` is dead: run 1234 (slot 2026-11-24 02:00 UTC), "
        "attempt 3 of 3: exit code 1")
    assert text.count("line ") == 4  # the last lines, in a code block
    assert text.endswith("<https://cron.example.com/runs/1234|Open run 1234>")


def test_a_failure_says_a_retry_follows_and_a_recovery_shows_no_output() -> None:
    failure = body(_notice(event="failure", status="failed"), NOW)["text"]
    assert ":warning: cronjobs: job `backup` failed" in failure
    assert "a retry follows" in failure
    recovery = body(_notice(event="recovery", status="succeeded"), NOW)["text"]
    assert "```" not in recovery and "recovered" in recovery


def _outgoing(i: int) -> Outgoing:
    return Outgoing(i, uuid.UUID(int=i), 1, f"https://h{i}.example.com/secret",
                    json.dumps(body(_notice(1), NOW)), 0, NOW + dt.timedelta(hours=24))


def test_closing_gives_up_on_hanging_receivers_and_leaves_them_to_a_later_tick() -> None:
    release = threading.Event()
    started = threading.Semaphore(0)
    headers: list[str] = []

    def hang(url: str, data: bytes, delivery_id: str) -> int:
        headers.append(delivery_id)
        started.release()
        release.wait(30)
        return 200

    notifier = Notifier(lambda: NOW, poster=hang)
    notifier.send([_outgoing(i) for i in range(6)])
    for _ in range(4):  # four senders hang, two notices wait in the queue
        assert started.acquire(timeout=10)
    outcomes = notifier.close(within=0.2)
    release.set()
    assert sorted(o.id for o in outcomes) == list(range(6))
    assert {(o.sent, o.retry) for o in outcomes} == {(False, True)}  # tried again later
    assert sorted(str(o.error) for o in outcomes) == (
        ["not sent: the tick ended first"] * 2
        + ["still being sent when the tick ended"] * 4)
    assert sorted(headers) == sorted(str(uuid.UUID(int=o.id)) for o in outcomes
                                     if o.error == "still being sent when the tick ended")
    assert notifier.pending == 0


def test_every_round_sends_the_document_with_its_delivery_id() -> None:
    item = _outgoing(7)
    later = NOW + dt.timedelta(minutes=3)
    data = json.loads(document(item, later))
    assert data == {**json.loads(item.body), "delivery_id": str(item.delivery_id),
                    "sent_at": later.isoformat()}
