"""Telling whether a database URL can be read as its writer meant, before libpq reads it.

libpq's parser quotes the piece it chokes on (``invalid percent-encoded token: "…"``), and a
password holding an unencoded ``@``, ``/``, ``%`` or a space is exactly what it chokes on,
or worse, reads as something else (``u:p@ss@host`` is the host ``ss@host``; ``u:pa/ss@h``
the host ``u`` with the port ``pa``). Masking the password cannot help once the parser no
longer knows where it ends. So a URL is checked here first, against the grammar of
https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-URIS and RFC 3986
(percent-escapes, no blanks, one ``@``, a host part of hosts and numeric ports, a query of
known ``key=value`` parameters). One that fails is described by :func:`unreadable` without
quoting any of it: only its scheme, and its host when the host can be told for sure.
"""

from __future__ import annotations

import re
from functools import cache

_SCHEME = re.compile(r"^(postgres(?:ql)?)://", re.IGNORECASE)
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_BLANK = re.compile(r"\s")
# one host of a host part: a name (letters, digits, -._~ and percent-escapes, a Unix socket
# directory among them), or an IPv6 address in brackets; an optional numeric port
_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})*)"
_HOSTSPEC = re.compile(rf"^{_HOST}(?::[0-9]*)?(?:,{_HOST}(?::[0-9]*)?)*$")
_NAMED_HOST = re.compile(rf"^{_HOST}(?::[0-9]+)?(?:,{_HOST}(?::[0-9]+)?)*$")

HOW_TO_FIX = (
    "percent-encode the user name and password (python3 -c 'import urllib.parse,sys; "
    "print(urllib.parse.quote(sys.argv[1], safe=\"\"))' 'the password' prints it encoded), "
    "or leave the password out of the URL and set PGPASSWORD or write it in ~/.pgpass")


def is_url(conninfo: str) -> bool:
    """Whether ``conninfo`` is a URL (else a libpq ``key=value`` string)."""
    return "://" in conninfo.split(None, 1)[0] if conninfo.strip() else False


def url_problem(url: str) -> str | None:
    """What makes ``url`` unreadable, in words that quote none of it; None if it is fine."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        return "it does not start with postgresql:// (or postgres://)"
    if _BLANK.search(url):
        return "it holds a space or another blank (write %20)"
    if "%00" in url:
        return "it holds %00, which libpq refuses"
    if _ESCAPE.search(url):
        return "it holds a % that is not followed by two hexadecimal digits (write %25)"
    rest = url[scheme.end():]
    at, slash = rest.find("@"), rest.find("/")
    if at != -1 and (slash == -1 or at < slash):
        rest = rest[at + 1:]  # what follows the user name and password
    host_end = min((i for i in (rest.find("/"), rest.find("?")) if i != -1), default=len(rest))
    hosts, rest = rest[:host_end], rest[host_end:]
    if "@" in hosts:
        return "it holds more than one @ before the host (write @ as %40)"
    if not _HOSTSPEC.match(hosts):
        return ("its host part is not a list of hosts with numeric ports (a / or @ in the "
                "password? write / as %2F and @ as %40)")
    path, _, query = rest.partition("?")
    if "@" in path:
        return "an @ follows the host (a / in the password? write / as %2F and @ as %40)"
    if "?" in query:
        return "it holds a second ? (write ? as %3F)"
    for parameter in query.split("&") if query else ():
        key, equals, _value = parameter.partition("=")
        if not equals or "=" in _value:
            return "its query (after ?) is not a list of key=value parameters (write = as %3D)"
        if key not in libpq_keywords():
            return "its query (after ?) names a parameter libpq does not know"
    return None


def outline(url: str) -> str:
    """Where ``url`` leads, as far as it can be told without showing any of its user name,
    password, database or parameters: the scheme, and the host part when the URL holds
    exactly one ``@``, with no ``/`` or ``?`` before it, and what follows it up to a ``/``
    or ``?`` reads as hosts and ports (else ``…``)."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        return "…"
    rest = url[scheme.end():]
    at = rest.find("@")
    before = rest[:at]
    if rest.count("@") != 1 or "/" in before or "?" in before:
        return f"{scheme.group(1).lower()}://…"
    hosts = re.split(r"[/?]", rest[at + 1:], maxsplit=1)[0]
    if not hosts or not _NAMED_HOST.match(hosts):
        return f"{scheme.group(1).lower()}://…"
    return f"{scheme.group(1).lower()}://…@{hosts}/…"


@cache
def libpq_keywords() -> frozenset[str]:
    """The connection parameters this libpq knows (a URL's query may set any of them)."""
    from psycopg import pq  # noqa: PLC0415  (only for a URL with a query)

    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())
