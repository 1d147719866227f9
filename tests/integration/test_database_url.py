"""A database URL that cannot be read as its writer meant (a password holding an unencoded
@, /, % or a blank) is refused in one line that says what is wrong and how to fix it, and
shows nothing of the URL past its scheme and host: not in the line, not in a log record
(-vv), not in a traceback; from --database-url, CRONJOBS_DATABASE_URL, DATABASE_URL and the
Python client alike. Fuzzed with Hypothesis: passwords (and user names, hosts, database
names) full of special characters."""

from __future__ import annotations

import io
import logging
import os
import re
import string
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import clean_env, make_invoke, run_cronjobs, snapshot
from cronjobs import Client
from cronjobs.db import config
from cronjobs.errors import ConfigurationError

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")  # then a fixed seed

SOURCES = ("--database-url", "CRONJOBS_DATABASE_URL", "DATABASE_URL", "Client")
COMMANDS = (("list",), ("define", "x", "@daily", "--command", "true"), ("tick",),
            ("status", "--json"), ("show", "1", "--json"))

SPECIAL = "@/%#?:[]!$&'()*+,;=~-._ \t\"\\<>^`{|}äß€"
ALPHABET = SPECIAL + string.ascii_letters + string.digits
# at least one of these makes a URL's password unreadable (a '%g' is no percent-escape)
BREAKS = ("@", "/", " ", "%g", "%%", "\t", "%")


@pytest.fixture(autouse=True)
def _no_database_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CRONJOBS_DATABASE_URL", "DATABASE_URL", "PGPASSWORD"):
        monkeypatch.delenv(var, raising=False)


class Captured:
    """Every log record of a command, formatted with its traceback (-vv logs at DEBUG)."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.handler.setLevel(logging.DEBUG)

    def __enter__(self) -> Captured:
        root = logging.getLogger()
        self.level = root.level
        root.setLevel(logging.DEBUG)
        root.addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self.level)


def attempt(source: str, url: str, command: tuple[str, ...]) -> tuple[int, str]:
    """(exit code, everything printed and logged) of ``command`` given ``url`` by
    ``source``."""
    remembered = set(config._remembered)
    try:
        with Captured() as logs:
            if source == "Client":
                try:
                    Client(url)
                except ConfigurationError as exc:
                    return exc.exit_code, f"{exc}\n{exc.__cause__}\n{exc.__context__}"
                raise AssertionError("the client accepted an unreadable URL")
            if source == "--database-url":
                result = make_invoke(["-vv", "--database-url", url])(*command)
            else:
                result = make_invoke(["-vv"])(*command, env={source: url})
            return result.exit_code, result.stdout + result.stderr + logs.stream.getvalue()
    finally:  # one example's passwords must not mask the next one's output
        config._remembered.intersection_update(remembered)


REFERENCE_URLS = ("postgresql://u:p@q@h/d", "postgresql://u:p/q@h/d", "postgresql://u:p q@h/d",
                  "postgresql://u:p%g@h/d", "postgresql://u:p@h:x/d", "postgresql://u:1/q@h/d",
                  "postgresql://u:p@h/d?x", "postgresql://u:p@h/d?nosuch=1",
                  "postgresql://u:p@h/d?a?b", "postgresql://u:p%00@h/d", "p@ss://u:p@h/d")


def reference(source: str, command: tuple[str, ...]) -> str:
    """What the refusals say whatever the password: the fixed words of every kind of
    refusal (a password may hold 'the' or 'sys' by chance)."""
    return "\n".join(attempt(source, url, command)[1] for url in REFERENCE_URLS)


_REFERENCES: dict[tuple[str, tuple[str, ...]], str] = {}


def leaked(password: str, output: str, allowed: str) -> list[str]:
    """The pieces of three characters or more of ``password`` in ``output`` that are not
    also in ``allowed`` (the scheme and host, and the fixed words)."""
    return sorted({password[i:j] for i in range(len(password))
                   for j in range(i + 3, len(password) + 1)
                   if password[i:j] in output and password[i:j] not in allowed})


@st.composite
def unreadable_urls(draw: st.DrawFn) -> tuple[str, str, str]:
    """(URL, its password, its scheme and host as written) of a URL whose password holds
    an unencoded character that breaks it."""
    text = st.text(alphabet=ALPHABET, max_size=12)
    before, brk, after = draw(text), draw(st.sampled_from(BREAKS)), draw(text)
    if brk == "%" and re.match(r"[0-9A-Fa-f]{2}", after):
        after = "g" + after  # '%01' would be a percent-escape, and the URL readable
    password = before + brk + after
    user = draw(st.one_of(st.sampled_from(["cron", "postgres", "u"]), text))
    host = draw(st.one_of(st.sampled_from(["db.example.com", "127.0.0.1", "[::1]:5432",
                                           "h1:5432,h2:5433", ""]), text))
    dbname = draw(st.one_of(st.sampled_from(["app", ""]), text))
    scheme = draw(st.sampled_from(["postgresql", "postgres"]))
    return f"{scheme}://{user}:{password}@{host}/{dbname}", password, f"{scheme}://{host}"


@settings(max_examples=150, deadline=None, derandomize=CI, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=unreadable_urls(), source=st.sampled_from(SOURCES),
       command=st.sampled_from(COMMANDS))
def test_no_piece_of_an_unreadable_password_is_shown(
        db: psycopg.Connection[Any], case: tuple[str, str, str], source: str,
        command: tuple[str, ...]) -> None:
    url, password, where = case
    key = (source, command)
    if key not in _REFERENCES:
        _REFERENCES[key] = reference(source, command)
    code, output = attempt(source, url, command)
    assert code == 2, output
    assert "invalid database URL in " in output
    assert "percent-encode" in output and "PGPASSWORD" in output and ".pgpass" in output
    assert leaked(password, output, where + "\n" + _REFERENCES[key]) == [], output


def test_an_unreadable_url_writes_nothing(db: psycopg.Connection[Any],
                                          database_url: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(database_url)
    broken = (f"postgresql://{params.get('user', 'postgres')}:p@ss/w%rd@"
              f"{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{params['dbname']}")
    before = snapshot(db)
    for command in COMMANDS:
        code, output = attempt("--database-url", broken, command)
        assert code == 2, output
    assert snapshot(db) == before


@pytest.mark.parametrize(("url", "where", "why"), [
    ("postgresql://cron:p@ss@db.example.com/app", "postgresql://…",
     "it holds more than one @ before the host (write @ as %40)"),
    ("postgresql://cron:pa/ss@db.example.com/app", "postgresql://…",
     "its host part is not a list of hosts with numeric ports"),
    ("postgresql://cron:100%sure@db.example.com:5432/app", "postgresql://…@db.example.com:5432/…",
     "it holds a % that is not followed by two hexadecimal digits (write %25)"),
    ("postgres://cron:two halves@db.example.com/app", "postgres://…@db.example.com/…",
     "it holds a space or another blank (write %20)"),
    ("postgresql://cron@db.example.com/app?passw0rd=x", "postgresql://…@db.example.com/…",
     "its query (after ?) names a parameter libpq does not know"),
])
def test_the_refusal_says_what_is_wrong_and_how_to_fix_it(url: str, where: str,
                                                          why: str) -> None:
    result = make_invoke(["--database-url", url])("list")
    assert result.exit_code == 2
    assert result.stdout == ""
    line = result.stderr
    assert line.count("\n") == 1
    assert line.startswith(f"error: invalid database URL in --database-url ({where}): {why}")
    assert ("percent-encode the user name and password (python3 -c 'import urllib.parse,sys; "
            "print(urllib.parse.quote(sys.argv[1], safe=\"\"))' 'the password' prints it "
            "encoded), or leave the password out of the URL and set PGPASSWORD or write it in "
            "~/.pgpass") in line


@pytest.mark.parametrize("url", [
    "postgresql://u:a:b@h:5432,h2:5433/db?sslmode=require&connect_timeout=3",
    "postgresql://u%40corp:p%40ss%2Fw%25rd@[::1]:5/d",
    "postgresql:///db?host=/tmp",
    "postgres://u:p@/db",
    "postgresql://u:pa#ss?x@h/db",  # libpq reads a # or ? before the @ as the password's
    "postgresql://u:p%C3%A4ss@h/db",
])
def test_readable_urls_are_taken_as_they_are(url: str) -> None:
    assert config.resolve_database(url, {}).conninfo == url


def test_a_real_process_shows_nothing_of_the_password_with_debug_logs() -> None:
    password = "Zq7x/K9w@PLm%#3vR"
    url = f"postgresql://cron:{password}@db.example.com:5432/app"
    for env in (clean_env(CRONJOBS_DATABASE_URL=url), clean_env(DATABASE_URL=url)):
        done = run_cronjobs("-vv", "tick", env=env)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert done.stderr.startswith("error: invalid database URL in ")
        assert "(postgresql://…)" in done.stderr  # two @: the host cannot be told
        assert "Traceback" not in done.stderr
        assert leaked(password, done.stderr, "") == []
