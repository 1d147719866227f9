"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronjobs.execution.registry import job

__version__ = "0.1.0"
__all__ = ["__version__", "job"]


def __getattr__(name: str) -> Any:
    # `cronjobs.job` is imported when first asked for: the commands (`cronjobs tick` above
    # all) import this package but only a user's module registering handlers needs it.
    if name == "job":
        from cronjobs.execution.registry import job  # noqa: PLC0415

        return job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
