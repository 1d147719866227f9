"""What the README shows a handler module is what `cronjobs` offers: every name it uses is
public, and every field of the context a handler receives is documented. (In a fresh
interpreter, the names import and the examples run: tests/integration/test_imports.py.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

import cronjobs
from cronjobs import JobContext

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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
