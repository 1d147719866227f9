"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL.

The public API: for the modules that register handlers, :func:`job` and
:class:`JobContext`; for applications, :class:`Client` and the results it returns
(:class:`JobInfo`, :class:`RunInfo`, :class:`AttemptInfo`, :class:`Defined`,
:class:`Removed`); and the errors of :mod:`cronjobs.errors`.

Every import of a cronjobs module runs this file first (the tick's, a handler's), so it
imports only what a handler uses; ``Client`` and its results, which need the whole library
(schedules in words, the jobs-file reader), are resolved when first asked for
(``cronjobs.Client``, ``from cronjobs import Client``: a module ``__getattr__``, PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronjobs.errors import (
    ConfigurationError,
    Conflict,
    CronjobsError,
    DatabaseUnavailable,
    EmbeddedServerError,
    EmbeddedUnavailable,
    InvalidDefinition,
    JobNotFound,
    Refused,
    RunNotFound,
    ScheduleError,
    SchemaNotReady,
    UsageError,
)
from cronjobs.execution.context import JobContext
from cronjobs.execution.registry import job

if TYPE_CHECKING:
    from cronjobs.client import AttemptInfo, Client, Defined, JobInfo, Removed, RunInfo

__version__ = "0.1.0"
__all__ = [
    "AttemptInfo",
    "Client",
    "ConfigurationError",
    "Conflict",
    "CronjobsError",
    "DatabaseUnavailable",
    "Defined",
    "EmbeddedServerError",
    "EmbeddedUnavailable",
    "InvalidDefinition",
    "JobContext",
    "JobInfo",
    "JobNotFound",
    "Refused",
    "Removed",
    "RunInfo",
    "RunNotFound",
    "ScheduleError",
    "SchemaNotReady",
    "UsageError",
    "__version__",
    "job",
]


_CLIENT_NAMES = ("AttemptInfo", "Client", "Defined", "JobInfo", "Removed", "RunInfo")


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from cronjobs import client  # noqa: PLC0415 - see the docstring

        return getattr(client, name)
    raise AttributeError(f"module 'cronjobs' has no attribute {name!r}")
