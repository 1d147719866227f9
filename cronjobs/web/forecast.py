"""The forecast page: a heatmap of the fleet's fires over the next day (hour by minute) or
week (day by hour), its peaks and the jobs that make them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from cronjobs.web.site import site_of


def page(request: Request) -> Response:
    site = site_of(request)
    view = request.query_params.get("view", "day")
    with site.store() as store:
        seen = site.outlooks.get(store, view)
        health = site.verdict(store)
    top = seen.heatmap.top
    levels = [[0 if count == 0 else max(1, -(-count * 5 // top)) for count in row]
              for row in seen.heatmap.cells]
    return site.render.page(request, "forecast.html", {
        "view": view, "ol": seen, "fc": seen.forecast, "map": seen.heatmap,
        "levels": levels, "health": health})
