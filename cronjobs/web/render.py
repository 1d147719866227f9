"""Pages from Jinja2 templates, autoescaped: every job name, command, output line and error
is user data. A request sent by the page's own refresh (``X-Fragment: 1``) gets the live
part of the page alone."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from cronjobs import __version__
from cronjobs.durations import NONE, elapsed, precise
from cronjobs.reports import Delivery
from cronjobs.timefmt import Times, in_zone_named, iso
from cronjobs.web.security import Admin

TEMPLATES = Path(__file__).parent / "templates"
FRAGMENT_HEADER = "x-fragment"

# a mark's colour class per run status
STATUSES = ("queued", "running", "failed", "succeeded", "dead", "cancelled")


# Instants read as on the command line (cronjobs.timefmt): ``2026-11-25 15:31 UTC`` in the
# page, which app.js rewrites into the viewer's zone, same pattern, with "3 min ago".

def _iso(value: dt.datetime | None) -> str:
    return iso(value) or ""


def _utc(value: dt.datetime | None) -> str:
    return Times(utc=True).at(value)


def _local(value: dt.datetime | None, zone: str) -> str:
    """An instant on a job's own wall clock (server side: the job's zone is a fact of the
    job, unlike the viewer's)."""
    return in_zone_named(value, zone)


def _pretty(value: object) -> str:
    """A handler's result (any JSON value) as indented JSON text (then autoescaped)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _seconds(value: float | None) -> str:
    """A start lateness in seconds (as `cronjobs status` writes it)."""
    return NONE if value is None else precise(value)


def _standing(delivery: Delivery) -> str:
    """Where a notification stands, in the words of `cronjobs show`."""
    return delivery.standing(_utc)


def _path(value: str) -> str:
    """A job name as one path segment."""
    return quote(value, safe="")


class Renderer:
    """The site's pages: ``admin`` is the server's admin (None: read-only), ``refresh``
    how often a page refreshes its live part."""

    def __init__(self, admin: Admin | None, refresh: dt.timedelta) -> None:
        self.admin = admin
        self.refresh = refresh
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(iso=_iso, utc=_utc, local=_local, duration=elapsed,
                                path=_path, pretty=_pretty, seconds=_seconds,
                                standing=_standing)
        self.env.globals.update(version=__version__, statuses=STATUSES)

    def page(self, request: Request, name: str, context: dict[str, Any],
             status: int = 200, *, live: bool = True) -> HTMLResponse:
        """The page ``name``, or (when ``live``) its live part for the refresh: the health
        banner and ``live/name``. ``context["health"]``: the verdict the banner shows (see
        Site.verdict); without it, the page has no banner."""
        fragment = live and request.headers.get(FRAGMENT_HEADER) == "1"
        admin = self.admin
        signed_in = admin is not None and admin.signed_in(request)
        context = {"request_path": request.url.path, "health": None,
                   "admin": admin is not None, "signed_in": signed_in,
                   "csrf": admin.csrf if admin is not None and signed_in else "",
                   "refresh": int(self.refresh.total_seconds()),
                   "done": request.query_params.get("done", ""), **context,
                   "live_template": f"live/{name}"}
        template = self.env.get_template("live/_fragment.html" if fragment else name)
        return HTMLResponse(template.render(context), status_code=status,
                            headers={"cache-control": "no-store", "vary": "X-Fragment"})

    def error(self, request: Request, status: int, *, title: str, message: str,
              back: tuple[str, str]) -> HTMLResponse:
        """An error in the site's layout: its title, what went wrong in words for the web,
        and the way back (link, words), as errors.py words them."""
        return self.page(request, "error.html", {
            "status": status, "title": title, "message": message, "back": back,
            "refresh": 0}, status=status, live=False)
