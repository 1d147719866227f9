"""Who may act, and what every response carries.

Reading needs nothing. Acting needs the admin token the server was started with, on every
request: either ``Authorization: Bearer TOKEN`` (scripts; a header no other site's page can
send) or the session cookie a sign-in sets, together with the form's CSRF field (browsers).
Both cookie and CSRF value are HMACs keyed by the token: every replica of the server
accepts them, none reveals the token, and changing the token signs everybody out.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

SESSION_COOKIE = "cronjobs_admin"
CSRF_FIELD = "csrf"
MAX_BODY_BYTES = 16 * 1024  # the largest form is a sign-in: far below this
MAX_TARGET_BYTES = 2048  # path and query string

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
    before anything reads it, and every response carries the security headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        if target > MAX_TARGET_BYTES:
            await _refuse(send, 414, "request target too long")
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            await _refuse(send, 413, f"request body larger than {MAX_BODY_BYTES} bytes")
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise _TooLarge
            return message

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        try:
            await self.app(scope, bounded, secured)
        except _TooLarge:
            await _refuse(send, 413, f"request body larger than {MAX_BODY_BYTES} bytes")


class _TooLarge(Exception):
    pass


async def _refuse(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *HEADERS]})
    await send({"type": "http.response.body", "body": body})
