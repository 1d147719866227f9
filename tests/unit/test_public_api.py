"""What the README shows a handler module is what `cronjobs` offers: every name it uses is
importable from the package, its Python examples run, and every field of the context a
handler receives is documented."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cronjobs
from cronjobs import JobContext

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def _names_shown() -> set[str]:
    names = set(re.findall(r"\bcronjobs\.([A-Za-z_]\w*)\b(?![/.\w])", README))
    for imported in re.findall(r"from cronjobs import ([\w, ()\n]+)", README):
        names |= {n.strip("() \n") for n in imported.split(",") if n.strip("() \n")}
    return names


def test_every_name_the_readme_shows_is_public() -> None:
    names = _names_shown()
    assert {"job", "JobContext"} <= names
    for name in names:
        assert name in cronjobs.__all__, name
        assert getattr(cronjobs, name) is not None


def test_every_public_name_is_importable_in_a_fresh_interpreter() -> None:
    names = ", ".join(sorted(n for n in cronjobs.__all__ if n != "__version__"))
    result = subprocess.run([sys.executable, "-c", f"from cronjobs import {names}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_the_readme_python_examples_run(tmp_path: Path) -> None:
    """Each example, as a module of its own in a fresh interpreter, imports and registers
    its handlers."""
    assert len(PYTHON_BLOCKS) >= 2
    for i, block in enumerate(PYTHON_BLOCKS):
        (tmp_path / f"readme_example_{i}.py").write_text(block)
    script = ("import importlib, json, sys\n"
              "from cronjobs.execution.registry import handlers\n"
              f"for i in range({len(PYTHON_BLOCKS)}):\n"
              "    importlib.import_module(f'readme_example_{i}')\n"
              "print(json.dumps(sorted(handlers())))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["daily_totals", "nightly_cleanup", "weekly_report"]


def test_every_field_of_the_context_is_documented() -> None:
    table = README.split("### Handlers\n", 1)[1].split("\n\n```", 1)[0]
    documented = set(re.findall(r"^\| `ctx\.(\w+)`", table, re.MULTILINE))
    fields = {f.name for f in dataclasses.fields(JobContext)}
    properties = {n for n, v in vars(JobContext).items() if isinstance(v, property)}
    assert documented == fields | properties
    variables = set(re.findall(r"`(CRONJOBS_\w+)`", table))
    example = JobContext(run_id=1, job="j", scheduled_for=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                         attempt=1)
    assert variables == set(example.environment())
