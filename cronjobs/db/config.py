"""Where the database is: flags, environment, libpq variables, or the embedded default."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import unquote

from psycopg.conninfo import conninfo_to_dict

from cronjobs.db import dburl
from cronjobs.errors import ConfigurationError

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


PREPARED_STATEMENTS = ("auto", "on", "off")


class DatabaseTarget(NamedTuple):
    """A database to connect to. ``conninfo`` is None for the embedded default.
    ``prepared``: whether the executor's statements may be server-side prepared statements
    (auto, on, off: see ``connect.prepared_statements_allowed``)."""

    conninfo: str | None
    source: str
    prepared: str = "auto"

    @property
    def embedded(self) -> bool:
        return self.conninfo is None

    @property
    def display(self) -> str:
        """Where we connect, safe to print: passwords masked."""
        if self.conninfo is None:
            return "embedded PostgreSQL"
        return mask_conninfo(self.conninfo)


def resolve_database(
    option: str | None, environ: Mapping[str, str] | None = None, *,
    prepared: str | None = None,
) -> DatabaseTarget:
    """Pick the database: ``--database-url``, ``CRONJOBS_DATABASE_URL``, ``DATABASE_URL``,
    libpq's ``PG*`` variables (when ``PGHOST`` or ``PGDATABASE`` is set), else embedded;
    and whether to use prepared statements there: ``prepared`` (``--prepared-statements``),
    else ``CRONJOBS_PREPARED_STATEMENTS``, else auto."""
    env = os.environ if environ is None else environ
    mode = resolve_prepared_statements(prepared, env)
    return _resolve_target(option, env)._replace(prepared=mode)


def resolve_prepared_statements(option: str | None, environ: Mapping[str, str]) -> str:
    """``--prepared-statements``, else ``CRONJOBS_PREPARED_STATEMENTS``, else auto (blank
    counts as unset; case does not matter)."""
    for value, source in ((option, "--prepared-statements"),
                          (environ.get("CRONJOBS_PREPARED_STATEMENTS"),
                           "CRONJOBS_PREPARED_STATEMENTS")):
        given = (value or "").strip()
        if given:
            if given.lower() not in PREPARED_STATEMENTS:
                raise ConfigurationError(
                    f"invalid {source}: {given[:40]!r} (expected auto, on or off)")
            return given.lower()
    return "auto"


def _resolve_target(option: str | None, env: Mapping[str, str]) -> DatabaseTarget:
    candidates = (
        (option, "--database-url"),
        (env.get("CRONJOBS_DATABASE_URL"), "CRONJOBS_DATABASE_URL"),
        (env.get("DATABASE_URL"), "DATABASE_URL"),
    )
    for value, source in candidates:
        if value is not None and value.strip():
            remember_passwords(value, env)
            return DatabaseTarget(_checked(value.strip(), source), source)
    remember_passwords(None, env)
    if env.get("PGHOST") or env.get("PGDATABASE"):
        return DatabaseTarget("", "PG* environment variables")
    return DatabaseTarget(None, "embedded default")


def _checked(conninfo: str, source: str) -> str:
    """``conninfo`` if libpq can read it as its writer meant; else a ConfigurationError
    that says what is wrong and how to fix it, quoting none of it (past the scheme and the
    host of a URL, when those can be told: see :mod:`cronjobs.db.dburl`). libpq's own
    message is never shown: it quotes the piece it could not read."""
    if dburl.is_url(conninfo):
        problem = dburl.url_problem(conninfo)
        if problem is None and not _readable(conninfo):
            problem = "libpq cannot read it"
        if problem is not None:
            raise ConfigurationError(
                f"invalid database URL in {source} ({dburl.outline(conninfo)}): {problem}; "
                f"{dburl.HOW_TO_FIX}")
    elif not _readable(conninfo):
        raise ConfigurationError(
            f"invalid database URL in {source}: libpq cannot read this key=value "
            "connection string (put a value holding a space or a quote in single quotes, "
            "with \\' and \\\\ inside), or leave the password out and set PGPASSWORD or "
            "write it in ~/.pgpass")
    return conninfo


def _readable(conninfo: str) -> bool:
    """Whether libpq parses ``conninfo`` (its error, which quotes a piece, is dropped here:
    nothing raised later is chained to it)."""
    try:
        conninfo_to_dict(conninfo)
    except Exception:
        return False
    return True


def mask_conninfo(conninfo: str) -> str:
    """Render a connection string as the user wrote it, with any password as ``***``."""
    if not conninfo:
        return "(libpq defaults from PG* variables)"
    return mask_secrets_in(conninfo, conninfo)


def mask_secrets_in(text: str, conninfo: str) -> str:
    """Remove the password of ``conninfo`` from ``text`` (e.g. a driver error message): as
    written, as decoded, and any fragment of four characters or more of either."""
    return _mask_fragments(scrub(text), passwords_in(conninfo))


def scrub(text: str) -> str:
    """Mask anything that looks like a password in a URL or a conninfo string, and every
    fragment of a password this process was given (see :func:`remember_passwords`)."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    text = _KV_PASSWORD.sub(r"\1***", text)
    return _mask_fragments(text, _remembered)


# The passwords of the database targets this process resolved: scrub() masks them in any
# text, including messages that quote a password without its URL around it (libpq's
# 'invalid percent-encoded token: "p%zzsecret"').
_remembered: set[str] = set()

_URL_USERINFO = re.compile(r"^\s*[a-z][a-z0-9+.-]*://([^?#]*)@", re.IGNORECASE)
_KV_VALUE = re.compile(r"password\s*=\s*(.*?)(?=\s+[A-Za-z_]+\s*=|$)",
                       re.IGNORECASE | re.DOTALL)
_FRAGMENT = 4


def remember_passwords(conninfo: str | None, environ: Mapping[str, str] | None = None) -> None:
    """Remember the passwords of ``conninfo`` and ``PGPASSWORD``, so that scrub() masks
    them wherever they turn up."""
    env = os.environ if environ is None else environ
    if conninfo:
        _remembered.update(passwords_in(conninfo))
    if env.get("PGPASSWORD"):
        _remembered.add(env["PGPASSWORD"])


def passwords_in(conninfo: str) -> set[str]:
    """Every way the password of ``conninfo`` may be quoted back, even when the string
    cannot be parsed: as written in a URL or after ``password=``, decoded, and as parsed."""
    found: set[str] = set()
    url = _URL_USERINFO.match(conninfo)
    if url and ":" in url.group(1):
        written = url.group(1).split(":", 1)[1]
        found |= {written, written.split("@", 1)[0]}
    for value in _KV_VALUE.findall(conninfo):
        found |= {value, value.strip("'\""), value.split("&", 1)[0], value.split()[0]
                  if value.split() else value}
    try:
        parsed = conninfo_to_dict(conninfo).get("password")
    except Exception:
        parsed = None
    if parsed:
        found.add(str(parsed))
    found |= {unquote(value) for value in found}
    return {value for value in found if value.strip()}


def _mask_fragments(text: str, secrets: set[str]) -> str:
    """Replace every stretch of ``text`` made of 4+ character fragments of a secret (or a
    shorter secret as a whole word) with ``***``."""
    covered = [False] * len(text)
    for secret in secrets:
        if len(secret) >= _FRAGMENT:
            for i in range(len(secret) - _FRAGMENT + 1):
                piece = secret[i:i + _FRAGMENT]
                at = text.find(piece)
                while at != -1:
                    covered[at:at + _FRAGMENT] = [True] * _FRAGMENT
                    at = text.find(piece, at + 1)
        else:
            for match in re.finditer(rf"(?<!\w){re.escape(secret)}(?!\w)", text):
                covered[match.start():match.end()] = [True] * (match.end() - match.start())
    if not any(covered):
        return text
    out: list[str] = []
    for char, hidden in zip(text, covered, strict=True):
        if not hidden:
            out.append(char)
        elif not out or out[-1] != "***":
            out.append("***")
    return "".join(out)
