"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL.

The public API for the modules that register handlers: :func:`job`, :class:`JobContext`
and the errors of :mod:`cronjobs.errors`.
"""

from __future__ import annotations

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

__version__ = "0.1.0"
__all__ = [
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

