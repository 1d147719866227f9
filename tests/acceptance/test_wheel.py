"""The built wheel ships schema.sql (and the named queries and migrations)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_wheel_contains_schema(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
         str(ROOT)], capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = tmp_path.glob("cronjobs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "cronjobs/db/schema.sql" in names
        assert "cronjobs/db/queries/queue.sql" in names
        assert {f"cronjobs/db/queries/{path.name}"
                for path in (ROOT / "cronjobs" / "db" / "queries").glob("*.sql")} <= names
        assert "cronjobs/db/migrations/0001_initial.sql" in names
        shipped = archive.read("cronjobs/db/schema.sql").decode()
    assert shipped == (ROOT / "schema.sql").read_text()
