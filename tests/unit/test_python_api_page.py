"""docs/reference/python-client.md documents the client whole: every public method of Client
has a docstring and is taught (there or in the how-to, docs/how-to/python-client.md), and
every field of the results it returns is in the reference's tables. (The how-to's examples
type-check and run: tests/integration/test_python_api_docs.py.)"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import cronjobs
from cronjobs import AttemptInfo, Client, Defined, JobInfo, Removed, RunInfo

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = (DOCS / "reference" / "python-client.md").read_text()
TAUGHT = PAGE + (DOCS / "how-to" / "python-client.md").read_text()


def _table(result: type) -> set[str]:
    section = PAGE.split(f"`{result.__name__}` — ", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))


def test_every_field_of_the_results_is_documented() -> None:
    for result in (JobInfo, RunInfo, AttemptInfo):
        fields = {f.name for f in dataclasses.fields(result)}
        assert _table(result) == fields, result.__name__
    for result in (Defined, Removed):
        for field in dataclasses.fields(result):
            assert f"`{field.name}`" in PAGE.split(f"`{result.__name__}` — ", 1)[1]


def test_the_results_are_public_flat_and_frozen() -> None:
    for result in (JobInfo, RunInfo, AttemptInfo, Defined, Removed):
        assert result.__name__ in cronjobs.__all__
        assert getattr(cronjobs, result.__name__) is result
        assert dataclasses.is_dataclass(result)
        assert result.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert result.__doc__


def test_every_public_method_of_the_client_has_a_docstring() -> None:
    methods = {name: member for name, member in inspect.getmembers(Client, inspect.isfunction)
               if not name.startswith("_") or name in ("__init__", "__enter__")}
    assert {"jobs", "job", "runs", "run", "trigger", "retry", "cancel", "ack"} <= set(methods)
    undocumented = [name for name, member in methods.items()
                    if name != "__init__" and not inspect.getdoc(member)]
    assert undocumented == []
    for name in methods:
        if not name.startswith("_"):
            assert f"{name}(" in TAUGHT or f".{name}" in TAUGHT, f"Client.{name} not taught"
