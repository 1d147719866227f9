"""Imports go one way: cli (and web, the dashboard, beside it) -> tick/worker ->
core/execution -> db -> cron -> the bottom (models, errors, clock, durations, instants,
validation). core and execution do not import each
other, and no module imports in a cycle. Function-level imports count as much as those at
the top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cronjobs"

BOTTOM = {"cronjobs.models", "cronjobs.reports", "cronjobs.errors", "cronjobs.durations",
          "cronjobs.validation", "cronjobs.instants", "cronjobs.clock", "cronjobs.timefmt"}
# What each layer may import, besides itself and the bottom.
MAY_IMPORT: dict[str, set[str]] = {
    "bottom": set(),
    "cron": set(),
    "db": {"cron"},
    "core": {"db", "cron"},
    "execution": {"db", "cron"},
    "tick": {"core", "execution", "db", "cron"},
    "client": {"tick", "core", "execution", "db", "cron"},
    "cli": {"client", "tick", "core", "execution", "db", "cron", "web"},
    # the dashboard: beside the CLI at the top (only the CLI's `serve` imports it)
    "web": {"core", "db", "cron"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    if module in BOTTOM:
        return "bottom"
    part = module.split(".")[1] if "." in module else ""
    if part in ("tick", "worker"):
        return "tick"
    if part in ("__main__",):
        return "cli"
    return part


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, at the top level) for every cronjobs import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "cronjobs":  # from cronjobs import cron
                names = [f"cronjobs.{alias.name}" for alias in node.names
                         if (PACKAGE / alias.name).is_dir()
                         or (PACKAGE / f"{alias.name}.py").exists()] or ["cronjobs"]
            elif any((PACKAGE.parent / (node.module.replace(".", "/") + "/" + a.name + ".py"))
                     .exists() for a in node.names):  # from cronjobs.cli import jobs
                names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name == "cronjobs" or name.startswith("cronjobs."):
                found.append((name, node.lineno, id(node) in top))
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_imports_go_one_way() -> None:
    wrong = []
    for module, path in sorted(_modules().items()):
        if module == "cronjobs":
            continue  # the public API: job, JobContext, errors (checked below)
        layer = _layer(module)
        for target, line, _ in _imports(path):
            if target == "cronjobs":
                continue  # __version__
            other = _layer(target)
            if other in (layer, "bottom") or other in MAY_IMPORT[layer]:
                continue
            wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({layer}) "
                         f"imports {target} ({other})")
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


def test_the_public_api_imports_only_what_a_handler_needs() -> None:
    """At import: the Client is loaded on first use only (module __getattr__, or for the
    type checker)."""
    imported = {target for target, _, top in _imports(PACKAGE / "__init__.py") if top}
    assert imported <= {"cronjobs.errors", "cronjobs.execution.registry",
                        "cronjobs.execution.context"} | BOTTOM, imported
    later = {target for target, _, top in _imports(PACKAGE / "__init__.py") if not top}
    assert later == {"cronjobs.client"}, later


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import cycle of ``graph`` (module -> the modules it imports), or None."""
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> list[str] | None:
        if module in trail:
            return [*trail[trail.index(module):], module]
        if module in done:
            return None
        for target in sorted(graph[module]):
            found = visit(target, [*trail, module])
            if found is not None:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found is not None:
            return found
    return None


def test_no_import_cycles() -> None:
    """None at import time, and none at all: an import under ``if TYPE_CHECKING`` or in a
    function counts too (it ties the modules together as much, only later)."""
    modules = _modules()
    at_import = {module: {target for target, _, at_top in _imports(path) if at_top
                          and target in modules and target != module}
                 for module, path in modules.items()}
    every = {module: {target for target, _, _ in _imports(path)
                      if target in modules and target != module}
             for module, path in modules.items()}
    for graph in (at_import, every):
        cycle = _cycle(graph)
        assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_counts_type_checking_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from cronjobs.web.site import Site\n")
    assert _imports(module) == [("cronjobs.web.site", 3, False)]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
