"""Where the database is: flags, environment, libpq variables, or the embedded default."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

from psycopg.conninfo import conninfo_to_dict

from cronjobs.errors import ConfigurationError

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


class DatabaseTarget(NamedTuple):
    """A database to connect to. ``conninfo`` is None for the embedded default."""

    conninfo: str | None
    source: str

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
    option: str | None, environ: Mapping[str, str] | None = None
) -> DatabaseTarget:
    """Pick the database: ``--database-url``, ``CRONJOBS_DATABASE_URL``, ``DATABASE_URL``,
    libpq's ``PG*`` variables (when ``PGHOST`` or ``PGDATABASE`` is set), else embedded."""
    env = os.environ if environ is None else environ
    candidates = (
        (option, "--database-url"),
        (env.get("CRONJOBS_DATABASE_URL"), "CRONJOBS_DATABASE_URL"),
        (env.get("DATABASE_URL"), "DATABASE_URL"),
    )
    for value, source in candidates:
        if value is not None and value.strip():
            return DatabaseTarget(_checked(value.strip(), source), source)
    if env.get("PGHOST") or env.get("PGDATABASE"):
        return DatabaseTarget("", "PG* environment variables")
    return DatabaseTarget(None, "embedded default")


def _checked(conninfo: str, source: str) -> str:
    try:
        conninfo_to_dict(conninfo)
    except Exception as exc:
        detail = mask_secrets_in(str(exc).splitlines()[0], conninfo)
        raise ConfigurationError(f"invalid database URL in {source}: {detail}") from None
    return conninfo


def mask_conninfo(conninfo: str) -> str:
    """Render a connection string as the user wrote it, with any password as ``***``."""
    if not conninfo:
        return "(libpq defaults from PG* variables)"
    return scrub(conninfo)


def mask_secrets_in(text: str, conninfo: str) -> str:
    """Remove the password of ``conninfo`` from ``text`` (e.g. a driver error message)."""
    try:
        password = conninfo_to_dict(conninfo).get("password")
    except Exception:
        password = None
    if password:
        text = text.replace(str(password), "***")
    return scrub(text)


def scrub(text: str) -> str:
    """Mask anything that looks like a password in a URL or a conninfo string."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    return _KV_PASSWORD.sub(r"\1***", text)
