"""What an admin may do: trigger, pause and resume a job, acknowledge its dead runs; retry,
cancel and acknowledge a run. These routes exist only on a server started with an admin
token, and each checks the token (see security.py) before it calls the operation the command
of the same name calls.

A browser's form gets a redirect (303) back to the page with what was done (or to the form's
``next`` page: the health banner's buttons return to the page they are on); a script using
``Authorization: Bearer`` gets JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from cronjobs.core import definitions, operations
from cronjobs.db.store import Store
from cronjobs.validation import check_name
from cronjobs.web.errors import answer
from cronjobs.web.pages import run_id_of
from cronjobs.web.security import SESSION_COOKIE, Admin, local_path
from cronjobs.web.site import Site, site_of

BY = "dashboard"  # who acknowledged a run, as `show` reports it

Outcome = tuple[str, str, dict[str, Any]]  # (page to go back to, what was done, JSON)


async def _form(request: Request) -> dict[str, str]:
    form = await request.form(max_files=0, max_fields=20, max_part_size=4096)
    return {key: value for key, value in form.items() if isinstance(value, str)}


def _admin(site: Site) -> Admin:
    if site.admin is None:  # pragma: no cover - the routes exist only with a token
        raise RuntimeError("action routes exist only with an admin token")
    return site.admin


def _refused(request: Request) -> Response:
    return answer(request, 403, "forbidden: this action needs the admin token (sign in on the "
                  "dashboard, or send Authorization: Bearer TOKEN)",
                  "This action needs the admin token: sign in (at the top of the page) "
                  "first. Nothing was changed.")


async def _act(request: Request, operation: Callable[[Store], Outcome]) -> Response:
    site = site_of(request)
    form = await _form(request)
    if not _admin(site).may_act(request, form):
        return _refused(request)

    def call() -> Outcome:
        with site.store() as store:
            return operation(store)

    page, done, data = await run_in_threadpool(call)
    site.forget_verdict()
    if _admin(site).bearer(request):
        return JSONResponse({"done": done, **data})
    if "next" in form:
        page = local_path(form["next"])
    return RedirectResponse(f"{page}?done={quote(done)}", status_code=303)


def _job_page(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}"


async def trigger(request: Request) -> Response:
    name = check_name(request.path_params["name"])

    def operation(store: Store) -> Outcome:
        run = operations.trigger(store, name)
        return f"/runs/{run.id}", "triggered", {"run_id": run.id, "status": run.status}

    return await _act(request, operation)


async def pause(request: Request) -> Response:
    name = check_name(request.path_params["name"])

    def operation(store: Store) -> Outcome:
        job = definitions.pause(store, name, note="paused from the dashboard")
        return _job_page(name), "paused", {"job": job.name, "state": job.state}

    return await _act(request, operation)


async def resume(request: Request) -> Response:
    name = check_name(request.path_params["name"])

    def operation(store: Store) -> Outcome:
        job = definitions.resume(store, name)
        return _job_page(name), "resumed", {"job": job.name, "state": job.state}

    return await _act(request, operation)


async def retry(request: Request) -> Response:
    run_id = run_id_of(request)

    def operation(store: Store) -> Outcome:
        run = operations.retry(store, run_id, by=BY)
        return f"/runs/{run.id}", "retried", {"run_id": run.id, "status": run.status}

    return await _act(request, operation)


async def cancel(request: Request) -> Response:
    run_id = run_id_of(request)

    def operation(store: Store) -> Outcome:
        run = operations.cancel(store, run_id)
        done = "cancelled" if run.status == "cancelled" else "cancel-requested"
        return f"/runs/{run.id}", done, {"run_id": run.id, "status": run.status}

    return await _act(request, operation)


async def ack(request: Request) -> Response:
    run_id = run_id_of(request)

    def operation(store: Store) -> Outcome:
        result = operations.acknowledge(store, run_id, by=BY)
        return (f"/runs/{run_id}", "already-acknowledged" if result.already else "acknowledged",
                {"run_id": run_id})

    return await _act(request, operation)


async def ack_all(request: Request) -> Response:
    """Acknowledge every dead run of the job (`cronjobs ack --all NAME`): what clears the
    health banner's "dead run(s) not acknowledged"."""
    name = check_name(request.path_params["name"])

    def operation(store: Store) -> Outcome:
        result = operations.acknowledge_all(store, name, by=BY)
        return (_job_page(name), "acknowledged-all",
                {"job": name, "run_ids": [run.id for run in result.runs]})

    return await _act(request, operation)


async def sign_in(request: Request) -> Response:
    """The admin token, typed once into the dashboard: a session cookie (an HMAC of the
    token, never the token) that lasts until the browser closes."""
    site = site_of(request)
    form = await _form(request)
    if not _admin(site).is_token(form.get("token", "")):
        return answer(request, 403, "forbidden: wrong admin token",
                      "That is the wrong admin token: you are not signed in.")
    response = RedirectResponse(local_path(form.get("next", "/")), status_code=303)
    response.set_cookie(SESSION_COOKIE, _admin(site).session, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


async def sign_out(request: Request) -> Response:
    site = site_of(request)
    form = await _form(request)
    if not _admin(site).may_act(request, form):
        return _refused(request)
    response = RedirectResponse(local_path(form.get("next", "/")), status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
