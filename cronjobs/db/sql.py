"""The named SQL of cronjobs: ``queries/`` (one file per concept, matching the stores of
``cronjobs/db/stores/``; one statement per name, every name unique across the files), the
canonical ``schema.sql`` and the numbered ``migrations/``. This is the only place SQL text
lives."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import LiteralString, NamedTuple

# Read from the files next to this module rather than through importlib.resources, whose
# machinery costs `cronjobs tick` 0.6 ms on first use. cronjobs is never imported from a
# zip archive: psycopg's compiled extension, which it needs, cannot be.
_HERE = Path(__file__).parent
_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def _read(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def _trusted(text: str) -> LiteralString:
    """SQL text read from this package's own files, never from input: a literal in all but
    name, so psycopg may run it as a query."""
    return text  # type: ignore[return-value, unused-ignore]


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a ``-- name: x`` annotated file into {name: statement}."""
    parts = _NAME.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = body.strip()
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        if not statement:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = _trusted(statement)
    return queries


@cache
def queries_by_concept() -> dict[str, dict[str, LiteralString]]:
    """{concept: {name: statement}}, a concept per file of ``queries/`` (``queue.sql``:
    ``queue``)."""
    return {path.stem: parse_queries(path.read_text(encoding="utf-8"))
            for path in sorted((_HERE / "queries").glob("*.sql"))}


@cache
def queries() -> dict[str, LiteralString]:
    """Every named statement, whichever file holds it: a name defined in two files is an
    error, as one defined twice in a file is."""
    found: dict[str, LiteralString] = {}
    where: dict[str, str] = {}
    for concept, named in queries_by_concept().items():
        for name, statement in named.items():
            if name in found:
                raise ValueError(f"query {name!r} is defined in queries/{where[name]}.sql "
                                 f"and in queries/{concept}.sql")
            found[name] = statement
            where[name] = concept
    return found


def query(name: str) -> LiteralString:
    try:
        return queries()[name]
    except KeyError:
        raise KeyError(f"no SQL query named {name!r} in cronjobs/db/queries/") from None


@cache
def schema() -> LiteralString:
    """The canonical current schema (``schema.sql``)."""
    return _trusted(_read("schema.sql"))


class Migration(NamedTuple):
    version: int
    name: str
    sql: LiteralString


@cache
def _migration_files() -> tuple[tuple[int, str, str], ...]:
    """(version, name, file name) of the numbered migrations, in order, checked to be 1..N
    without gaps."""
    found = []
    for entry in (_HERE / "migrations").iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.name))
    found.sort()
    if [version for version, _, _ in found] != list(range(1, len(found) + 1)):
        raise RuntimeError("migrations must be numbered 0001, 0002, ... without gaps")
    return tuple(found)


@cache
def migrations() -> tuple[Migration, ...]:
    """The numbered migrations, in order."""
    return tuple(Migration(version, name, _trusted(_read(f"migrations/{file}")))
                 for version, name, file in _migration_files())


def current_version() -> int:
    """The schema version this cronjobs needs: the last migration's (read from the file
    names alone: every command checks it)."""
    return _migration_files()[-1][0]
