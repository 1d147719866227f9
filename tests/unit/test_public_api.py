"""What the documentation shows a handler module (the handlers, jobs-as-code and Python
client pages) is what `cronjobs` offers: every name it uses is public, and every field of the
context a handler receives is documented on the handlers page. (In a fresh interpreter, the
names import and the examples run: tests/integration/test_imports.py.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

import cronjobs
from cronjobs import JobContext

DOCS = Path(__file__).resolve().parents[2] / "docs"
HANDLERS = (DOCS / "how-to" / "handlers.md").read_text()
SHOWN = "".join((DOCS / page).read_text() for page in (
    "how-to/handlers.md", "how-to/jobs-as-code.md", "how-to/python-client.md",
    "reference/python-client.md"))


def _names_shown() -> set[str]:
    names = set(re.findall(r"\bcronjobs\.([A-Za-z_]\w*)\b(?![/.\w])", SHOWN))
    for wrapped, line in re.findall(r"from cronjobs import (?:\(([^)]*)\)|([^\n]+))", SHOWN):
        imported = wrapped or line
        names |= {n.strip() for n in imported.split(",") if n.strip()}
    return names


def test_every_name_the_docs_show_is_public() -> None:
    names = _names_shown()
    assert {"job", "JobContext"} <= names
    for name in names:
        assert name in cronjobs.__all__, name
        assert getattr(cronjobs, name) is not None


def test_every_field_of_the_context_is_documented() -> None:
    table = HANDLERS.split("## Handlers\n", 1)[1].split("\n\n```", 1)[0]
    documented = set(re.findall(r"^\| `ctx\.(\w+)`", table, re.MULTILINE))
    fields = {f.name for f in dataclasses.fields(JobContext)}
    properties = {n for n, v in vars(JobContext).items() if isinstance(v, property)}
    assert documented == fields | properties
    variables = set(re.findall(r"`(CRONJOBS_\w+)`", table))
    example = JobContext(run_id=1, job="j", scheduled_for=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                         attempt=1)
    assert variables == set(example.environment())
