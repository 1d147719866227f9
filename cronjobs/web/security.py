"""Who may act, and what every response carries.

Reading needs nothing. Acting needs the admin token the server was started with, on every
request: either ``Authorization: Bearer TOKEN`` (scripts; a header no other site's page can
send) or the session cookie a sign-in sets, together with the form's CSRF field (browsers).
Both cookie and CSRF value are HMACs keyed by the token: every replica of the server
accepts them, none reveals the token, and changing the token signs everybody out.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

SESSION_COOKIE = "cronjobs_admin"
CSRF_FIELD = "csrf"
MAX_BODY_BYTES = 16 * 1024  # the largest form is a sign-in: far below this
MAX_TARGET_BYTES = 2048  # path and query string
# A body over MAX_BODY_BYTES is read and dropped before the 413 is sent, up to this much and
# for this long: a client still sending when the server closes the connection gets a reset
# instead of the answer. Past these bounds the 413 is sent anyway (and may be lost).
DRAIN_BYTES = 64 * 1024 * 1024
DRAIN_SECONDS = 10.0

HEADERS = [
    # no inline script or style anywhere: what a job's output holds can never run
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# (scope, status, message) -> the ASGI response that refuses the request
Refuse = Callable[[Scope, int, str], Awaitable[ASGIApp]]


class Admin:
    """The admin token and what is derived from it."""

    def __init__(self, token: str) -> None:
        self._key = token.encode("utf-8")
        self.session = self._mac("session")
        self.csrf = self._mac("csrf:" + self.session)

    def _mac(self, what: str) -> str:
        return hmac.new(self._key, what.encode(), hashlib.sha256).hexdigest()

    def is_token(self, value: str) -> bool:
        return hmac.compare_digest(value.encode("utf-8", "surrogatepass"), self._key)

    def signed_in(self, request: Request) -> bool:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return hmac.compare_digest(cookie.encode("utf-8", "surrogatepass"),
                                   self.session.encode())

    def bearer(self, request: Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.is_token(value.strip())

    def may_act(self, request: Request, form: dict[str, str]) -> bool:
        """The token in the header; or the session cookie, the form's CSRF value and, when
        the browser names it, an Origin that is this server."""
        if self.bearer(request):
            return True
        csrf = form.get(CSRF_FIELD, "")
        return (self.signed_in(request) and same_origin(request)
                and hmac.compare_digest(csrf.encode("utf-8", "surrogatepass"),
                                        self.csrf.encode()))


def same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:  # not sent by every browser on every POST: the CSRF value decides
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


def local_path(target: str) -> str:
    """``target`` when it is a path on this server, else ``/`` (no open redirect)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


class Bounded:
    """ASGI middleware: a request target or body over its bound is refused (414, 413)
    before the application reads it, and every response carries the security headers.
    ``refuse`` makes the refusal (by default one line of text).

    Whatever the answer, what is left of the request's body is read and dropped before it
    is sent (see DRAIN_BYTES), unless the client waits for a "100 Continue" before sending
    it: a client still sending when the server closes the connection would get a reset
    instead of the answer."""

    def __init__(self, app: ASGIApp, refuse: Refuse | None = None) -> None:
        self.app = app
        self.refuse = refuse or _text

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"0")
        waits = headers.get(b"expect", b"").lower() == b"100-continue"
        # the body is read to its end (or was empty, or the client waits to send it)
        read = waits or (length == b"0" and b"transfer-encoding" not in headers)
        seen = 0

        async def bounded() -> Message:
            nonlocal seen, read
            message = await receive()
            read = read or message["type"] != "http.request" or not message.get("more_body")
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise _TooLarge
            return message

        async def secured(message: Message) -> None:
            nonlocal read
            if message["type"] == "http.response.start":
                if not read:
                    read = True
                    await _drain(receive, int(length) if length.isdigit() else DRAIN_BYTES)
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        async def refused(status: int, text: str) -> None:
            answer = await self.refuse(scope, status, text)
            await answer(scope, receive, secured)

        too_large = f"request body larger than {MAX_BODY_BYTES} bytes"
        target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        if target > MAX_TARGET_BYTES:
            await refused(414, "request target too long")
            return
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            await refused(413, too_large)
            return
        try:
            await self.app(scope, bounded, secured)
        except _TooLarge:
            await refused(413, too_large)


async def _drain(receive: Receive, length: int) -> None:
    """Read and drop what is left of a request's body, when ``length`` (its declared
    length, else DRAIN_BYTES) is at most DRAIN_BYTES, for DRAIN_SECONDS at most."""
    if length > DRAIN_BYTES:
        return
    seen = 0
    deadline = time.monotonic() + DRAIN_SECONDS
    while seen <= length:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            message = await asyncio.wait_for(receive(), left)
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class _TooLarge(Exception):
    pass


async def _text(scope: Scope, status: int, text: str) -> ASGIApp:
    """A refusal as one line of text (the connection closed once it is sent)."""
    body = (text + "\n").encode()

    async def respond(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    return respond
