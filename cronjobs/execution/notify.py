"""Webhook notifications: a JSON POST to each of a job's ``--notify`` URLs when a run dies,
an attempt fails or a job recovers (``--notify-on``), sent in the background of the tick,
delivered at least once through an outbox (docs/how-to/notifications.md).

The HTTP client is the standard library's ``urllib``: one POST with a timeout is all a
webhook needs, and it keeps the tick's install and import path as small as they are.

Sending never delays a run. The tick writes each notification to the outbox
(``job_notifications``, 'pending', claimed by the tick) after the outcome is recorded, and
hands it to :class:`Notifier`; daemon threads POST it, each try bounded by :data:`TIMEOUT`,
each round by :data:`TRIES` tries (tenacity, through
:func:`cronjobs.execution.deliveries.retrying_calls`) within :data:`SERIES` seconds; when the
tick ends it waits at most :data:`DRAIN` seconds for what is still being sent. How each round
went is written back by the tick's own connection: delivered, refused for good, or still
pending, to be claimed by a later tick after a back-off (computed in SQL,
``finish_deliveries``) until its deadline. Every POST carries the delivery's
``Cronjobs-Delivery-Id`` header, the same in every round, so that a receiver can drop a
repeat. URLs are secrets: everything shown or logged names a receiver by
:func:`~cronjobs.validation.mask_url` only.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cronjobs import __version__
from cronjobs.execution.deliveries import retrying_calls
from cronjobs.models import DeliveryOutcome, NotifyEvent, Outgoing, RunStatus
from cronjobs.validation import mask_url

log = logging.getLogger(__name__)

TIMEOUT = 5.0  # seconds per try (connect and answer)
TRIES = 3  # per receiver and notice
SERIES = 15.0  # seconds at most for the tries of one delivery
FIRST_WAIT, MAX_WAIT = 0.5, 2.0  # backoff between tries
DRAIN = 20.0  # seconds the tick waits, at its end, for deliveries still under way
CLAIM = dt.timedelta(minutes=5)  # a round's claim: a tick that died holding it leaves it so long
DEADLINE = dt.timedelta(hours=24)  # tried until then (--notify-deadline)
REDELIVER = 100  # due deliveries of the outbox a tick takes at most
HEADER = "Cronjobs-Delivery-Id"  # the idempotency key: the same in every round
SENDERS = 4  # threads posting at once
OUTPUT_LINES = 20  # lines of the output tail in the body
LINE_CHARS = 500
TEXT_LINES = 5  # of them, in the `text` shown by chat tools

SUMMARY = {"dead": "is dead", "failure": "failed", "recovery": "recovered"}
MARK = {"dead": ":red_circle:", "failure": ":warning:", "recovery": ":large_green_circle:"}


@dataclass(frozen=True)
class Notice:
    """What one notification says about one run (the same for all of its receivers)."""

    event: NotifyEvent
    run_id: int
    job: str
    scheduled_for: dt.datetime
    attempt: int
    max_attempts: int
    status: RunStatus  # dead, failed (a retry follows) or succeeded
    error: str | None
    exit_code: int | None
    output_tail: str | None
    run_url: str | None  # the dashboard's page of the run, when --dashboard-url is set


def run_url(dashboard: str | None, run_id: int) -> str | None:
    return None if not dashboard else f"{dashboard.rstrip('/')}/runs/{run_id}"


def body(notice: Notice, sent_at: dt.datetime) -> dict[str, Any]:
    """The JSON document POSTed (documented in docs/how-to/monitoring.md, "Webhook
    notifications")."""
    lines = (notice.output_tail or "").rstrip("\n").splitlines()[-OUTPUT_LINES:]
    lines = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 3] + "..."
             for line in lines]
    return {
        "event": notice.event,
        "job": notice.job,
        "run_id": notice.run_id,
        "scheduled_for": notice.scheduled_for.astimezone(dt.UTC).isoformat(),
        "attempt": notice.attempt,
        "max_attempts": notice.max_attempts,
        "status": notice.status,
        "error": notice.error,
        "exit_code": notice.exit_code,
        "output_tail": lines,
        "url": notice.run_url,
        "sent_at": sent_at.astimezone(dt.UTC).isoformat(),
        "text": text(notice, lines),
    }


def text(notice: Notice, lines: list[str]) -> str:
    """One message a Slack or Mattermost incoming webhook shows as is."""
    slot = notice.scheduled_for.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"{MARK[notice.event]} cronjobs: job `{notice.job}` {SUMMARY[notice.event]}: "
            f"run {notice.run_id} (slot {slot}), attempt {notice.attempt} of "
            f"{notice.max_attempts}")
    if notice.event == "failure" and notice.status == "failed":
        head += ", a retry follows"
    parts = [head + (f": {notice.error}" if notice.error else "")]
    shown = [line.replace("```", "'''") for line in lines[-TEXT_LINES:]]
    if shown and notice.event != "recovery":
        parts.append("```\n" + "\n".join(shown) + "\n```")
    if notice.run_url:
        parts.append(f"<{notice.run_url}|Open run {notice.run_id}>")
    return "\n".join(parts)


class DeliveryError(Exception):
    """A try that failed: ``retry`` says whether another try may do better."""

    def __init__(self, message: str, *, retry: bool, http_status: int | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.http_status = http_status


def post(url: str, data: bytes, delivery_id: str, timeout: float | None = None) -> int:
    """One POST, with ``delivery_id`` in its :data:`HEADER`; returns the HTTP status (2xx),
    else raises DeliveryError with a message that never quotes the URL."""
    # Deferred to the first delivery: urllib.request (with http.client) costs every tick
    # about 5 ms to import (bench/empty_tick.py), and most ticks send nothing.
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    request = urllib.request.Request(url, data=data, method="POST", headers={  # noqa: S310
        "Content-Type": "application/json", "User-Agent": f"cronjobs/{__version__}",
        HEADER: delivery_id})
    try:
        with urllib.request.urlopen(request, timeout=timeout or TIMEOUT  # noqa: S310
                                    ) as answer:
            answer.read(65536)
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        code = int(exc.code)
        raise DeliveryError(f"HTTP {code}", retry=code >= 500 or code in (408, 425, 429),
                            http_status=code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryError(_hide(f"{reason}", url) or type(exc).__name__, retry=True) from None
    if not 200 <= status < 300:
        raise DeliveryError(f"HTTP {status}", retry=False, http_status=status)
    return status


def _hide(message: str, url: str) -> str:
    """``message`` without the URL or any of its parts longer than a few characters."""
    text = message.replace(url, mask_url(url))
    try:
        parts = urlsplit(url)
        secrets = [parts.path, parts.query, parts.fragment, parts.username or "",
                   parts.password or ""]
    except ValueError:
        return "(details hidden)"
    for secret in secrets:
        if len(secret) > 3:
            text = text.replace(secret, "/***")
    return text[:500]


def document(item: Outgoing, sent_at: dt.datetime) -> bytes:
    """What a round POSTs: the document written to the outbox, with its ``delivery_id``
    and the round's ``sent_at``."""
    data = json.loads(item.body)
    data["delivery_id"] = str(item.delivery_id)
    data["sent_at"] = sent_at.astimezone(dt.UTC).isoformat()
    return json.dumps(data, ensure_ascii=False).encode()


class Notifier:
    """The deliveries one tick tries: queued by :meth:`send`, posted by daemon threads,
    their outcomes taken by :meth:`take` (to be written by the tick's connection)."""

    def __init__(self, now: Callable[[], dt.datetime],
                 poster: Callable[[str, bytes, str], int] = post) -> None:
        self._now = now
        self._post = poster
        self._queue: queue.SimpleQueue[Outgoing | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._done: list[DeliveryOutcome] = []
        self._pending = 0
        self._sending: dict[int, Outgoing] = {}  # thread id -> what it sends
        self._closed = False

    def send(self, deliveries: list[Outgoing]) -> None:
        """Queue each of ``deliveries`` for a round of tries; returns at once."""
        for item in deliveries:
            with self._lock:
                self._pending += 1
                spawn = len(self._threads) < min(SENDERS, self._pending)
            self._queue.put(item)
            if spawn:
                thread = threading.Thread(target=self._serve, name="cronjobs-notify",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()

    def take(self) -> list[DeliveryOutcome]:
        """The rounds finished since the last call."""
        with self._lock:
            done, self._done = self._done, []
        return done

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def close(self, within: float = DRAIN) -> list[DeliveryOutcome]:
        """Wait up to ``within`` seconds for the rounds under way, then give up on the rest
        for this tick (they stay in the outbox, tried again later); returns every outcome
        not taken yet."""
        deadline = time.monotonic() + within
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        left: list[DeliveryOutcome] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left.append(DeliveryOutcome(item.id, False, True, 0, None,
                                            "not sent: the tick ended first"))
        with self._lock:
            self._closed = True  # what is still being sent now is recorded here
            stuck = list(self._sending.values())
            self._sending.clear()
            self._pending = 0
        if stuck:
            log.warning("%d notification(s) still being sent when the tick ended: tried "
                        "again later", len(stuck), extra={"action": "notify"})
        left += [DeliveryOutcome(item.id, False, True, 0, None,
                                 "still being sent when the tick ended")
                 for item in stuck]
        return self.take() + left

    # -- the sending threads ------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            me = threading.get_ident()
            with self._lock:
                self._sending[me] = item
            try:
                outcome = self._deliver(item)
            except Exception as exc:  # never expected: a bug must not end the thread
                outcome = DeliveryOutcome(item.id, False, True, 0, None,
                                          _hide(f"{type(exc).__name__}: {exc}", item.url))
            with self._lock:
                if self._closed:  # given up on and recorded by close()
                    return
                del self._sending[me]
                self._done.append(outcome)
                self._pending -= 1

    def _deliver(self, item: Outgoing) -> DeliveryOutcome:
        data = document(item, self._now())
        tries = 0

        def once() -> int:
            nonlocal tries
            tries += 1
            return self._post(item.url, data, str(item.delivery_id))

        target = mask_url(item.url)
        extra = {"action": "notify", "run_id": item.run_id, "delivery_id": str(item.delivery_id)}
        try:
            status = retrying_calls(
                once, attempts=TRIES, first_wait=FIRST_WAIT, max_wait=MAX_WAIT,
                until=time.monotonic() + SERIES,
                retry_on=lambda exc: isinstance(exc, DeliveryError) and exc.retry)
        except DeliveryError as exc:
            log.warning("notification of run %s to %s failed after %d tries (%s): %s",
                        item.run_id, target, tries,
                        "tried again later" if exc.retry else "not tried again", exc,
                        extra=extra)
            return DeliveryOutcome(item.id, False, exc.retry, tries, exc.http_status, str(exc))
        log.info("notification of run %s sent to %s", item.run_id, target, extra=extra)
        return DeliveryOutcome(item.id, True, False, tries, status, None)
