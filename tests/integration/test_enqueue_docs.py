"""docs/how-to/enqueue.md shows enqueueing on psycopg, SQLAlchemy and Django connections with
examples that cannot rot: every ```python block of the page is run, in order, against a
database of its own (each block a program of its own; they share the database), and the
database then holds what they said they wrote."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "enqueue.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)


def test_the_examples_run(database_url: str, db: psycopg.Connection[Any],
                          tmp_path: Path) -> None:
    assert len(BLOCKS) == 6
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRONJOBS_", "PG")) and k != "DATABASE_URL"}
    env["CRONJOBS_DATABASE_URL"] = database_url
    for i, block in enumerate(BLOCKS):
        path = tmp_path / f"enqueue_example_{i:02}.py"
        path.write_text(block)
        result = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, (path.name, result.stdout, result.stderr)
    keys = {key for (key,) in db.execute("SELECT key FROM job_runs WHERE key IS NOT NULL")}
    assert {"order-1", "sqlalchemy-connection", "sqlalchemy-session", "django"} <= keys
    assert not keys & {"never", "sqlalchemy-rolled-back", "django-rolled-back"}
    # the psycopg example's two calls with one key made one run; the batch made 5,000
    assert db.execute("SELECT count(*) FROM job_runs WHERE key LIKE 'batch-%'"
                      ).fetchone() == (5000,)
    assert db.execute("SELECT count(*) FROM job_runs").fetchone() == (5000 + 5,)
