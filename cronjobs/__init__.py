"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL.

The public API for the modules that register handlers: :func:`job`, :class:`JobContext`
and the errors of :mod:`cronjobs.errors`.
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

if TYPE_CHECKING:
    from cronjobs.context import JobContext
    from cronjobs.registry import job

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


def __getattr__(name: str) -> Any:
    # `job` and `JobContext` are imported when first asked for: every command (`cronjobs
    # tick` above all) imports this package, but only the modules that register handlers and
    # the processes that run them need these two.
    if name == "job":
        from cronjobs.registry import job  # noqa: PLC0415

        return job
    if name == "JobContext":
        from cronjobs.context import JobContext  # noqa: PLC0415

        return JobContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
