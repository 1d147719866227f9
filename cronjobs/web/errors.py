"""Errors as the web shows them: a browser (which asks for HTML) gets a page in the site's
layout, with a title, the message worded for the web and a link back; a script gets the
one line of text it always got.

The messages come from the core, which words them for the command line too ("no job named
'x' (see `cronjobs list`)"): what to type at a terminal is kept apart in the error
(CronjobsError.advice), and the page shows the message without it (CronjobsError.what), as
a dashboard's reader has no terminal at hand.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from cronjobs.db.config import scrub
from cronjobs.web.render import Renderer
from cronjobs.web.security import local_path

TITLES = {
    400: "That address is not valid",
    403: "Not allowed",
    404: "Not found",
    405: "Not allowed here",
    409: "Not possible now",
    413: "Too large",
    414: "Address too long",
    500: "Something went wrong",
    503: "Unavailable",
}

def wants_html(request: Request) -> bool:
    """Whether the client is a browser (it asks for text/html); scripts get text."""
    return "text/html" in request.headers.get("accept", "")


def web_words(message: str) -> str:
    """``message`` (an error's, without its command-line advice: CronjobsError.what) as a
    sentence."""
    text = message.strip().removeprefix("forbidden: ").strip()
    if not text:
        return message
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def back_of(request: Request) -> tuple[str, str]:
    """Where the page's link back goes, and its words: the run's or job's page after one
    of its actions; the page a sign-in came from; else the dashboard."""
    parts = request.url.path.split("/")
    if request.method == "POST":
        if len(parts) == 4 and parts[1] == "runs" and parts[2].isdigit():
            return f"/runs/{parts[2]}", f"Back to run {parts[2]}"
        if len(parts) == 4 and parts[1] == "jobs" and parts[2]:
            return f"/jobs/{quote(parts[2], safe='')}", f"Back to job {parts[2]}"
        referer = urlsplit(request.headers.get("referer", ""))
        if referer.netloc and referer.netloc == request.headers.get("host"):
            return local_path(referer.path or "/"), "Back to the page you came from"
    return "/", "Back to the dashboard"


# What the web says where the core's words are not for a reader of the dashboard.
WEB_WORDS = {
    404: "There is no page at this address.",
    405: "This address does not take that kind of request: use the dashboard's links and "
         "buttons instead.",
    413: "The request was larger than the dashboard accepts. Nothing was changed.",
    414: "The address was longer than the dashboard accepts.",
    500: "Something went wrong on the server (the details are in its log). Nothing was "
         "changed by this request.",
}


def answer(request: Request, status: int, message: str, web: str | None = None) -> Response:
    """An error: ``message`` as one line of text, or for a browser a page that says it in
    words for the web (``web``, else ``message`` as a sentence)."""
    if wants_html(request):
        renderer: Renderer = request.app.state.site.render
        return renderer.error(request, status,
                              title=TITLES.get(status, "Something went wrong"),
                              message=web or web_words(scrub(message)), back=back_of(request))
    return PlainTextResponse(scrub(message) + "\n", status_code=status,
                             headers={"cache-control": "no-store"})
