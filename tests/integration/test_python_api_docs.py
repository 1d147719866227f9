"""docs/how-to/python-client.md teaches the client with examples that cannot rot: every ```python
block of the page is type-checked with mypy --strict and run, in order, against a database
of its own (each block is a program of its own; they share the database)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "python-client.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)


def _write(tmp_path: Path) -> list[Path]:
    paths = []
    for i, block in enumerate(BLOCKS):
        path = tmp_path / f"python_api_example_{i:02}.py"
        path.write_text(block)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_the_examples_type_check_strictly(tmp_path: Path) -> None:
    assert len(BLOCKS) >= 8
    paths = _write(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / ".mypy_cache"), *map(str, paths)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_examples_run(database_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CRONJOBS_", "PG")) and k != "DATABASE_URL"}
    env["CRONJOBS_DATABASE_URL"] = database_url
    for path in _write(tmp_path):
        result = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, (path.name, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, (path.name, result.stderr)
