"""No part of a password is ever printed: not by an invalid URL, not by a failed
connection, not by an internal error (with or without -v and its traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import quote

import pytest

from conftest import make_invoke

PASSWORD = "Zq7x/K9w@PLm#3vR"  # '/', '@' and '#' must be percent-encoded in a URL
ENCODED = quote(PASSWORD, safe="")


def assert_hidden(*outputs: str) -> None:
    """Neither the password, as written or encoded, nor any 4-character piece of it."""
    text = "\n".join(outputs)
    for secret in (PASSWORD, ENCODED):
        for i in range(len(secret) - 3):
            assert secret[i:i + 4] not in text, (secret[i:i + 4], text)


INVALID = [
    f"postgresql://u:{ENCODED}%zz@host/db",              # invalid percent-encoding
    f"postgresql://u:%zz{ENCODED}@host/db",
    f"postgresql://u:{ENCODED}%00@host/db",              # forbidden %00
    f"postgresql://u:{ENCODED[:6]} {ENCODED[6:]}@host/db",  # a space
    f"postgresql://u:{ENCODED}@[::1/db",                 # unterminated IPv6 address
    f"postgresql://u:{ENCODED}@host/db?bogus=1",         # unknown parameter
    f"postgresql://u@host/db?password={ENCODED}%zz",     # the password as a parameter
    f"postgresql://u:{ENCODED}@host:notaport/db",        # a port that is no number
    f"host=h password={PASSWORD[:6]} {PASSWORD[6:]}",    # key/value, the password split
    f"host=h password='{PASSWORD}",                      # unterminated quote
    f"host=h password={PASSWORD} bogus=1",
]


@pytest.mark.parametrize("url", INVALID)
@pytest.mark.parametrize("source", ["--database-url", "CRONJOBS_DATABASE_URL", "DATABASE_URL"])
def test_invalid_url(url: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CRONJOBS_DATABASE_URL", "DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    if source == "--database-url":
        result = make_invoke(["--database-url", url])("list")
    else:
        result = make_invoke([])("list", env={source: url})
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"error: invalid database URL in {source}")
    assert result.stderr.count("\n") == 1
    assert_hidden(result.stdout, result.stderr)


def _server(server_url: str) -> tuple[str, int]:
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(server_url)
    return str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)


@pytest.mark.parametrize("shape", ["no such role", "refused"])
def test_connection_errors(shape: str, server_url: str) -> None:
    host, port = _server(server_url)
    url = {
        "no such role": f"postgresql://nosuchrole_{ENCODED[:4]}:{ENCODED}@{host}:{port}/nodb",
        "refused": f"postgresql://u:{ENCODED}@127.0.0.1:1/db",
    }[shape]
    result = make_invoke(["--database-url", url, "--connect-timeout", "1", "-vv"])("list")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "cannot connect to the database at postgresql://" in result.stderr
    assert_hidden(result.stdout, result.stderr)


_FAULT = """
import sys
import cronjobs.core.definitions
from cronjobs.cli import run

quoted = sys.argv[1] + " and " + sys.argv[2]

def broken(store):
    raise RuntimeError("lost " + quoted)

cronjobs.core.definitions.list_jobs = broken
sys.argv = ["cronjobs", *sys.argv[3:]]
run()
"""


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_internal_error(verbose: list[str], database_url: str) -> None:
    """An internal error whose message quotes the password, decoded and as written: the
    one line and (with -v) the logged traceback mask it."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(database_url)
    # (a Unix socket directory, the embedded server's, is percent-encoded in a URL's host)
    host = quote(str(params.get("host") or "127.0.0.1"), safe="")
    url = (f"postgresql://{params.get('user', 'postgres')}:{ENCODED}@"
           f"{host}:{params.get('port') or 5432}/{params['dbname']}")
    env = {**os.environ, "CRONJOBS_DATABASE_URL": url}
    done = subprocess.run([sys.executable, "-c", _FAULT, PASSWORD, ENCODED, *verbose, "list"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "internal error: RuntimeError: lost ***" in done.stderr
    assert ("Traceback" in done.stderr) == bool(verbose)
    assert_hidden(done.stdout, done.stderr)
