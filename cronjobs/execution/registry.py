"""Python handlers: registered with ``@cronjobs.job("name")`` in the user's modules, found by
importing the modules named by ``--app`` / ``CRONJOBS_APP`` (from the current directory
first, as ``python -m`` does)."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cronjobs.errors import ConfigurationError, UsageError
from cronjobs.validation import check_name

Handler = Callable[..., Any]
F = TypeVar("F", bound=Handler)

_handlers: dict[str, Handler] = {}
_declared: dict[str, Declared] = {}
_loading: list[str] = []  # the --app module being imported (load_apps), if any


@dataclass(frozen=True)
class Declared:
    """A job declared on its handler (``@cronjobs.job(name, schedule=...)``): the options as
    given (validated by ``cronjobs apply``, exactly as ``define`` validates its own), and
    where, for its messages (``myapp/jobs.py:12 (myapp.jobs.cleanup)``)."""

    name: str
    options: dict[str, Any]
    where: str
    # the modules it belongs to: the decorated function's, and the --app module whose
    # import declared it (load_apps), if another
    modules: frozenset[str] = frozenset()


def job(
    name: str,
    *,
    schedule: str | None = None,
    tz: str | None = None,
    payload: dict[str, Any] | str | None = None,
    catchup: str | None = None,
    catchup_limit: int | None = None,
    starting_deadline: str | None = None,
    overlap: str | None = None,
    max_attempts: int | None = None,
    backoff: str | None = None,
    timeout: str | None = None,
    lease: str | None = None,
    alert_command: str | None = None,
    alert_on_failure: bool | None = None,
    pause_after_failures: int | None = None,
    group: str | None = None,
    notify: str | Sequence[str] | None = None,
    notify_on: str | Sequence[str] | None = None,
    keep_succeeded: str | None = None,
    keep_failed: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated function as the handler called ``name``::

        @cronjobs.job("nightly_cleanup")
        def nightly_cleanup(ctx): ...

    With a ``schedule``, the job is declared too, for ``cronjobs apply --app MODULE`` to
    create or update (jobs as code). The other keywords are ``define``'s options under the
    same names (``tz``, ``overlap``, ``timeout``...), with the same defaults and the same
    validation. A declaration states the whole job, as a jobs file does: left out, an
    option takes its default, on a job that exists too (apply's diff marks the change
    ``(default)``)::

        @cronjobs.job("nightly_cleanup", schedule="0 3 * * *", tz="Europe/Berlin",
                      overlap="skip", timeout="1h",
                      notify=["https://hooks.example.com/T000/XXXX"],
                      notify_on=["dead", "recovery"])
        def nightly_cleanup(ctx): ...

    ``notify`` is one URL or a list of them; ``notify_on`` a list of events or a
    comma-separated string (``"dead,recovery"``). ``keep_succeeded`` and ``keep_failed``
    keep the job's finished runs longer or shorter than the global retention (``"30d"``;
    ``"default"``, or left out: the global one).
    """
    passed = dict(locals())  # the keywords: a test keeps them those of core.spec.FIELDS
    check_name(name, what="handler name")
    given = {key: _listed(value) for key, value in passed.items()
             if key not in ("name", "schedule") and value is not None}
    if schedule is None and given:
        raise UsageError(f"job {name!r}: {', '.join(sorted(given))} given without a schedule "
                         "(a job is declared on its handler by its schedule)")

    def register(func: F) -> F:
        existing = _handlers.get(name)
        if existing is not None and existing is not func:
            where = f"{existing.__module__}.{existing.__qualname__}"
            raise UsageError(f"handler {name!r} is already registered by {where}")
        _handlers[name] = func
        if schedule is not None:
            code = getattr(func, "__code__", None)
            place = (f"{code.co_filename}:{code.co_firstlineno} " if code is not None else "")
            _declared[name] = Declared(name, {"schedule": schedule, **given},
                                       f"{place}({func.__module__}.{func.__qualname__})",
                                       frozenset({func.__module__, *_loading[-1:]}))
        return func

    return register


def _listed(value: str | Sequence[str] | None) -> Any:
    """A sequence as the jobs file's array (a list), so both declare alike; else as given."""
    if value is None or isinstance(value, str):
        return value
    return list(value) if isinstance(value, list | tuple) else value  # others: apply says


def declared(modules: Iterable[str] | None = None) -> dict[str, Declared]:
    """The jobs declared on their handlers by the modules imported so far; with ``modules``,
    only those declared in one of them or below (``myapp`` covers ``myapp.jobs``), or while
    :func:`load_apps` imported one of them."""
    if modules is None:
        return dict(_declared)
    wanted = tuple(modules)
    return {name: d for name, d in _declared.items()
            if any(m == w or m.startswith(w + ".") for m in d.modules for w in wanted)}


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
        _loading.append(module)
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure inside the user's module
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ConfigurationError(f"cannot import --app module {module!r}: {detail}") from exc
        finally:
            _loading.pop()
    return handlers()


def _current_directory_first() -> None:
    with contextlib.suppress(OSError):  # a directory removed under us imports nothing
        cwd = os.getcwd()
        if sys.path[:1] not in ([cwd], [""]):
            sys.path.insert(0, cwd)
