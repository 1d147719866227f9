"""Retries have one home per kind of call: database retries live in cronjobs/db/retry.py,
a webhook's delivery retries in cronjobs/execution/deliveries.py. Only these two import
tenacity, only the notifier uses the delivery policy (no database call is retried by it),
and no loop elsewhere catches a database error to try again (a job's retries are rows, not
loops)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cronjobs"
HOME = PACKAGE / "db" / "retry.py"
DELIVERIES = PACKAGE / "execution" / "deliveries.py"
# what a hand-written retry loop catches
DATABASE_ERRORS = {"DatabaseUnavailable", "OperationalError", "Error", "InterfaceError",
                   "SerializationFailure", "DeadlockDetected", "AdminShutdown"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Name):
        return {node.id}
    return set()


def _importers(wanted: str) -> list[str]:
    """The modules of the package that import ``wanted`` (or a module below it)."""
    importers = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m == wanted or m.startswith(wanted + ".") for m in modules):
                importers.append(path.relative_to(PACKAGE.parent).as_posix())
    return sorted(set(importers))


def test_only_the_two_retry_homes_import_tenacity() -> None:
    assert _importers("tenacity") == ["cronjobs/db/retry.py",
                                      "cronjobs/execution/deliveries.py"]


def test_only_the_notifier_retries_by_the_delivery_policy() -> None:
    assert _importers("cronjobs.execution.deliveries") == ["cronjobs/execution/notify.py"]


def test_no_loop_retries_a_database_call_by_hand() -> None:
    found = []
    for path in _modules():
        if path == HOME:
            continue
        for loop in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(loop, (ast.While, ast.For)):
                continue
            for node in ast.walk(loop):
                if isinstance(node, ast.ExceptHandler) and _names(node.type) & DATABASE_ERRORS:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []
