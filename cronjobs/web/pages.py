"""What the server shows: the dashboard, a job's page, a run's page, /healthz and /metrics.
Each reads through the core functions the commands use, on one pooled connection. Every page
leads with the health banner: the verdict of /healthz (and `status --check`), computed once
per page by Site.verdict."""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cronjobs.core.definitions import schedule_words
from cronjobs.core.health import lateness_json, storage_json
from cronjobs.core.metrics import CONTENT_TYPE
from cronjobs.core.metrics import metrics as exposition
from cronjobs.core.operations import MAX_RUN_ID, show
from cronjobs.core.outlook import job_outlook
from cronjobs.core.overview import TIMELINE_RUNS, job_page, overview
from cronjobs.db.config import scrub
from cronjobs.errors import CronjobsError, UsageError
from cronjobs.web.site import site_of

RUN_ID = re.compile(r"[0-9]{1,19}")


def run_id_of(request: Request) -> int:
    """The run id of the path, or 400 for one that is not a run id at all."""
    text = request.path_params["run_id"]
    if not RUN_ID.fullmatch(text) or not 1 <= int(text) <= MAX_RUN_ID:
        raise UsageError("malformed run id: run ids are positive integers")
    return int(text)


def dashboard(request: Request) -> Response:
    site = site_of(request)
    params = request.query_params
    with site.store() as store:
        page = overview(store, after=params.get("after", ""), search=params.get("q"))
        health = site.verdict(store)
    words = {line.definition.id: schedule_words(line.definition) for line in page.jobs}
    return site.render.page(request, "dashboard.html", {"ov": page, "words": words,
                                                        "health": health})


def job(request: Request) -> Response:
    site = site_of(request)
    with site.store() as store:
        page = job_page(store, request.path_params["name"])
        definition = page.description.definition
        place, crowded = job_outlook(site.outlooks.get(store, "day"), definition.name,
                                     definition.schedule, definition.timezone,
                                     definition.paused_until)
        health = site.verdict(store)
    return site.render.page(request, "job.html", {
        "page": page, "job": definition, "words": schedule_words(definition),
        "place": place, "crowded": crowded, "health": health,
        "timeline_runs": f"{TIMELINE_RUNS:,}"})


def run(request: Request) -> Response:
    site = site_of(request)
    run_id = run_id_of(request)
    with site.store() as store:
        detail = show(store, run_id)
        health = site.verdict(store)
    return site.render.page(request, "run.html", {"detail": detail, "run": detail.run,
                                                  "health": health})


async def healthz(request: Request) -> Response:
    """The verdict of `status --check`: 200, or 503 with the same reasons. With
    ``?scope=server``: whether this server can answer (its database is reachable and at
    the current schema), whatever the installation's health (a readiness probe). The
    installation's answer also carries the warnings and the storage's figures (as
    `status --json`)."""
    site = site_of(request)
    scope = request.query_params.get("scope", "installation")
    if scope not in ("installation", "server"):
        return JSONResponse({"error": "scope must be installation or server"},
                            status_code=400)

    def check() -> dict[str, Any]:
        with site.store() as store:
            if scope == "server":
                return {"healthy": True, "checked_at": store.now().isoformat(),
                        "problems": []}
            found = site.verdict(store, fresh=True)
            return {"healthy": found.healthy, "checked_at": found.now.isoformat(),
                    "problems": found.problems, "more_problems": found.more_problems,
                    "warnings": found.warnings,
                    "start_lateness": lateness_json(found.lateness)
                    if found.lateness is not None else None,
                    "storage": storage_json(found.storage)
                    if found.storage is not None else None}

    try:
        answer = await run_in_threadpool(check)
    except CronjobsError as exc:
        answer = {"healthy": False, "checked_at": None, "problems": [scrub(exc.message)]}
    return JSONResponse({"healthy": answer["healthy"], "scope": scope, **answer},
                        status_code=200 if answer["healthy"] else 503,
                        headers={"cache-control": "no-store"})


def metrics(request: Request) -> Response:
    site = site_of(request)
    with site.store() as store:
        now = store.now()
        text = exposition(store, now=now, per_job=site.settings.metrics_per_job,
                          lateness=site.lateness(store, now))
    return Response(text, media_type=CONTENT_TYPE, headers={"cache-control": "no-store"})
