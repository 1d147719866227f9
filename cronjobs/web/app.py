"""The Starlette application: its routes, its connection pool and how errors become short
4xx/5xx answers (never a traceback): a page in the site's layout for a browser, one line of
text for a script (see errors.py)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from cronjobs.db.config import scrub
from cronjobs.errors import (
    CronjobsError,
    DatabaseUnavailable,
    JobNotFound,
    Refused,
    RunNotFound,
    SchemaNotReady,
    UsageError,
)
from cronjobs.web import actions, forecast, pages
from cronjobs.web.errors import WEB_WORDS, answer, web_words
from cronjobs.web.security import Bounded
from cronjobs.web.site import Settings, Site

log = logging.getLogger(__name__)
HERE = Path(__file__).parent


def create_app(settings: Settings) -> Starlette:
    """The ASGI application `cronjobs serve` runs (read-only without an admin token)."""
    site = Site(settings)
    routes: list[BaseRoute] = [
        Route("/", pages.dashboard),
        Route("/forecast", forecast.page),
        Route("/jobs/{name}", pages.job),
        Route("/runs/{run_id}", pages.run),
        Route("/healthz", pages.healthz),
        Route("/metrics", pages.metrics),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if site.admin is not None:  # a read-only server has no action endpoint at all
        routes += [
            Route("/signin", actions.sign_in, methods=["POST"]),
            Route("/signout", actions.sign_out, methods=["POST"]),
            Route("/jobs/{name}/trigger", actions.trigger, methods=["POST"]),
            Route("/jobs/{name}/pause", actions.pause, methods=["POST"]),
            Route("/jobs/{name}/resume", actions.resume, methods=["POST"]),
            Route("/jobs/{name}/ack", actions.ack_all, methods=["POST"]),
            Route("/runs/{run_id}/retry", actions.retry, methods=["POST"]),
            Route("/runs/{run_id}/cancel", actions.cancel, methods=["POST"]),
            Route("/runs/{run_id}/ack", actions.ack, methods=["POST"]),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        site.pool.open(wait=False)
        try:
            yield
        finally:
            site.pool.close()

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPException: _http_error, CronjobsError: _cronjobs_error, Exception: _internal})
    app.state.site = site
    # /jobs/NAME/ is not /jobs/NAME: a 404, never a redirect that turns one path into another
    app.router.redirect_slashes = False
    app.add_middleware(Bounded, refuse=_refusal)
    return app


async def _refusal(scope: Scope, status: int, message: str) -> Response:
    """The answer of the size bounds (security.Bounded): 413 or 414, and the connection
    closed once it is sent."""
    response = answer(Request(scope), status, message, WEB_WORDS.get(status))
    response.headers["connection"] = "close"
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover - registered for it alone
        raise exc
    return answer(request, exc.status_code, exc.detail, WEB_WORDS.get(exc.status_code))


STATUS_OF: list[tuple[type[CronjobsError], int]] = [
    (JobNotFound, 404), (RunNotFound, 404), (Refused, 409), (SchemaNotReady, 503),
    (UsageError, 400), (DatabaseUnavailable, 503)]


async def _cronjobs_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, CronjobsError):  # pragma: no cover - registered for it alone
        raise exc
    status = next((code for kind, code in STATUS_OF if isinstance(exc, kind)), 500)
    if status == 500:
        log.error("error on %s %s: %s", request.method, request.url.path, scrub(exc.message),
                  extra={"action": "serve"})
        return answer(request, 500, "internal error (see the server's log)", WEB_WORDS[500])
    # a browser's page says it without what to type at a terminal
    return answer(request, status, exc.message, web_words(scrub(exc.what)))


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("internal error on %s %s", request.method, request.url.path,
                  extra={"action": "serve"})
    return answer(request, 500, "internal error (see the server's log)", WEB_WORDS[500])

