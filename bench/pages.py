"""The dashboard served (``cronjobs serve`` as a subprocess) and its pages timed from a
client; a slow page traced (its named queries, the slowest under EXPLAIN ANALYZE)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import benchlib
from common import checked

PAGE_LIMITS = {"/healthz": 50.0, "/metrics": 500.0}  # ms; every other page: 200 ms

PAGE_BUDGET = 60.0  # seconds of requests per page and database, once 3 are timed
PAGE_TIMEOUT = 60.0  # seconds: a request still unanswered is cut off (recorded as this)


def timed_fetches(url: str, n: int) -> list[float]:
    """``n`` timed fetches after 3 warm-ups; fewer (3 at least, no warm-up) when the page
    takes so long that ``n`` would not fit in PAGE_BUDGET."""
    first = fetch(url)
    if first >= PAGE_TIMEOUT * 1000:
        return [first]
    if first > 2000:  # a slow page: its first answer is timed too
        times = [first]
        spent = first / 1000
        while len(times) < n and spent < PAGE_BUDGET:
            times.append(fetch(url))
            spent += times[-1] / 1000
        return times
    for _ in range(2):
        fetch(url)
    return [fetch(url) for _ in range(n)]


@contextlib.contextmanager
def serving(conninfo: str, cli: Sequence[str] | None = None) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = benchlib.clean_env({"CRONJOBS_DATABASE_URL": conninfo})
    proc = subprocess.Popen([*(cli or benchlib.cronjobs_command()), "serve", "--port", str(port),
                             "--no-access-log"], env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch(base + "/healthz?scope=server")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


ERRORS: dict[str, int] = {}  # path -> the error status it answered with (see fetch)


def fetch(url: str) -> float:
    """Milliseconds to fetch ``url``. A 503 of /healthz is an answer too, and so is the 404
    of the run page of a database that holds no run (the empty one without the drains);
    any other error status is an answer recorded in ERRORS (a page that refuses: the busy
    job's page before it bounded its timeline)."""
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=PAGE_TIMEOUT) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        exc.read()
        if exc.code not in (404, 503):
            ERRORS[url.split("/", 3)[-1]] = exc.code
    except TimeoutError:
        return PAGE_TIMEOUT * 1000
    return (time.perf_counter() - start) * 1000


# Renders one page in-process (Starlette's test client) recording every named query it
# runs, then runs each SELECT under EXPLAIN ANALYZE with the same parameters; prints JSON:
# the page's time and the queries, slowest first, with the slowest one's plan.
TRACE = r'''
import json, sys, time
import psycopg
from cronjobs.db import session as cjsession, sql as cjsql
from cronjobs.web.app import create_app
from cronjobs.web.site import Settings
from starlette.testclient import TestClient

conninfo, path = sys.argv[1], sys.argv[2]
seen = []

def traced(method):
    original = getattr(cjsession.Session, method)
    def wrapper(self, name, params=None, *args, **kw):
        start = time.perf_counter()
        try:
            return original(self, name, params, *args, **kw)
        finally:
            seen.append((name, params, (time.perf_counter() - start) * 1000, method))
    setattr(cjsession.Session, method, wrapper)

for method in ("rows", "values", "count", "send", "later"):
    traced(method)
with TestClient(create_app(Settings(conninfo=conninfo))) as client:
    client.get(path)
    seen.clear()
    start = time.perf_counter()
    client.get(path)
    page_ms = (time.perf_counter() - start) * 1000
calls = list(seen)
out = []
with psycopg.connect(conninfo, autocommit=True) as conn:
    calls.sort(key=lambda c: -c[2])
    for i, (name, params, ms, method) in enumerate(calls):
        query = cjsql.query(name)
        entry = {"query": name, "client_ms": round(ms, 2)}
        if i == 0:  # the slowest only: EXPLAIN ANALYZE runs it again
            try:
                entry["plan"] = [r[0] for r in conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) " + query, params).fetchall()]
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
        out.append(entry)
if out and "plan" in out[0]:
    out[0]["plan"] = out[0]["plan"][:80]
print(json.dumps({"page_ms": page_ms, "named queries": len(out),
                  "sql ms (sum of client times)": sum(q["client_ms"] for q in out),
                  "queries": out}))
'''


def trace_page(conninfo: str, path: str) -> dict[str, Any]:
    result = checked(benchlib.run([sys.executable, "-c", TRACE, conninfo, path],
                                  benchlib.clean_env()), f"trace {path}")
    traced: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return traced

