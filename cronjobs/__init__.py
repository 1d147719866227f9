"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL.

The public API: for the modules that register handlers, :func:`job` and
:class:`JobContext`; for applications, :class:`Client`; and the errors of
:mod:`cronjobs.errors`.

Every import of a cronjobs module runs this file first (the tick's, a handler's), so it
imports only what a handler uses; ``Client``, which needs the whole library (schedules in
words, the jobs-file reader), is resolved when first asked for (``cronjobs.Client``,
``from cronjobs import Client``: a module ``__getattr__``, PEP 562).
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
    from cronjobs.client import Client

__version__ = "0.1.0"
__all__ = [
    "Client",
    "ConfigurationError",
    "Conflict",
    "CronjobsError",
    "DatabaseUnavailable",
    "EmbeddedServerError",
    "EmbeddedUnavailable",
    "InvalidDefinition",
    "JobContext",
    "JobNotFound",
    "Refused",
    "RunNotFound",
    "ScheduleError",
    "SchemaNotReady",
    "UsageError",
    "__version__",
    "job",
]


def __getattr__(name: str) -> Any:
    if name == "Client":
        from cronjobs.client import Client  # noqa: PLC0415 - see the docstring

        return Client
    raise AttributeError(f"module 'cronjobs' has no attribute {name!r}")
