"""What a fresh interpreter loads: every public name imports from the package, the
documentation's Python examples (the handlers and jobs-as-code pages) register
their handlers, and the tick's start-up path leaves the schedule descriptions out. (What
those pages show, read without running anything: tests/unit/test_public_api.py.)"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cronjobs
from cronjobs.cli import COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The pages whose Python examples are whole modules (they were the README's, in this order;
# the Python client's examples are programs, run by test_python_api_docs.py).
PAGES = ("how-to/handlers.md", "how-to/jobs-as-code.md")
PYTHON_BLOCKS = [block for page in PAGES
                 for block in re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(),
                                         re.DOTALL)]


def test_every_public_name_is_importable_in_a_fresh_interpreter() -> None:
    names = ", ".join(sorted(n for n in cronjobs.__all__ if n != "__version__"))
    result = subprocess.run([sys.executable, "-c", f"from cronjobs import {names}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_the_docs_python_examples_run(tmp_path: Path) -> None:
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


def test_the_tick_does_not_load_descriptions() -> None:
    """cron-descriptor and the describe module stay off the tick's start-up path."""
    code = ("import sys, cronjobs.cli, cronjobs.tick, cronjobs.worker, cronjobs.cli.render, "
            "cronjobs.cron; print(sorted(m for m in sys.modules if 'descri' in m))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def _loaded_by_the_tick_command() -> set[str]:
    """The cronjobs modules a fresh interpreter holds once it has the `tick` command."""
    code = ("import sys\nfrom cronjobs.cli import main_group\nimport click\n"
            "main_group.get_command(click.Context(main_group), 'tick')\n"
            "print(sorted(m for m in sys.modules if m.startswith('cronjobs')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return set(ast.literal_eval(done.stdout))


def test_the_tick_imports_no_other_family() -> None:
    families = {f"cronjobs.cli.{module}" for module, _ in COMMANDS.values()}
    assert _loaded_by_the_tick_command() & families == {"cronjobs.cli.ticking"}


def test_the_tick_imports_only_what_a_tick_needs() -> None:
    """An empty tick is measured against a process that only connects (docs/benchmarks.md):
    what other commands read and render stays off its path — the worker, the dashboard,
    status and explain, the renders of everything but a tick's report, and the readers'
    stores and rows (cronjobs.reports)."""
    loaded = _loaded_by_the_tick_command()
    unwanted = {"cronjobs.worker", "cronjobs.web", "cronjobs.client", "cronjobs.reports",
                "cronjobs.db.stores.reports", "cronjobs.db.stores.runs",
                "cronjobs.db.stores.groups", "cronjobs.db.stores.storage",
                "cronjobs.db.stores.forecast",
                "cronjobs.core.health", "cronjobs.core.facts", "cronjobs.core.explain",
                "cronjobs.core.groups", "cronjobs.cli.render.jobs", "cronjobs.cli.render.runs",
                "cronjobs.cli.render.status", "cronjobs.cli.render.explain",
                "cronjobs.cli.render.groups"}
    assert "cronjobs.cli.render.ticks" in loaded
    assert {m for m in loaded if m in unwanted or m.startswith("cronjobs.web.")} == set()
