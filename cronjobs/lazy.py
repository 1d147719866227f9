"""Modules loaded when first used, so that a command does not pay for what it never runs.

`cronjobs tick` starts every minute, and an empty tick's cost is mostly its start-up:
importing a module it does not use (the schedule math, when nothing is due) is time lost
on every tick.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """Module ``name``, executed at the first access to one of its attributes (the standard
    library's ``importlib.util.LazyLoader``). Already imported, it is returned as it is."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
