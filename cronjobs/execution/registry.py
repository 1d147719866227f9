"""Python handlers: registered with ``@cronjobs.job("name")`` in the user's modules, found by
importing the modules named by ``--app`` / ``CRONJOBS_APP`` (from the current directory
first, as ``python -m`` does)."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from cronjobs.errors import ConfigurationError, UsageError
from cronjobs.validation import check_name

Handler = Callable[..., Any]
F = TypeVar("F", bound=Handler)

_handlers: dict[str, Handler] = {}


def job(name: str) -> Callable[[F], F]:
    """Register the decorated function as the handler called ``name``::

        @cronjobs.job("nightly_cleanup")
        def nightly_cleanup(ctx): ...
    """
    check_name(name, what="handler name")

    def register(func: F) -> F:
        existing = _handlers.get(name)
        if existing is not None and existing is not func:
            where = f"{existing.__module__}.{existing.__qualname__}"
            raise UsageError(f"handler {name!r} is already registered by {where}")
        _handlers[name] = func
        return func

    return register


def handlers() -> dict[str, Handler]:
    return dict(_handlers)


def lookup(handlers: dict[str, Handler], name: str) -> Handler:
    """The handler called ``name`` among ``handlers``; ConfigurationError saying which are
    registered when there is none."""
    handler = handlers.get(name)
    if handler is None:
        known = ", ".join(sorted(handlers)) or "none"
        raise ConfigurationError(
            f"handler {name!r} is not registered by --app modules (registered: {known})")
    return handler


def load_apps(modules: Iterable[str]) -> dict[str, Handler]:
    """Import each module (its ``@job`` decorators register handlers); return the registry.

    The current directory comes first on the import path, as for ``python -m``: ``--app
    myjobs`` finds ``./myjobs.py`` without PYTHONPATH. (The ``cronjobs`` executable's own
    path starts with its ``bin`` directory instead; a handler's process inherits the tick's
    directory.)"""
    modules = tuple(modules)
    if modules:
        _current_directory_first()
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure inside the user's module
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ConfigurationError(f"cannot import --app module {module!r}: {detail}") from exc
    return handlers()


def _current_directory_first() -> None:
    with contextlib.suppress(OSError):  # a directory removed under us imports nothing
        cwd = os.getcwd()
        if sys.path[:1] not in ([cwd], [""]):
            sys.path.insert(0, cwd)
