"""cronjobs: cron-triggered scheduled jobs kept in PostgreSQL."""

from cronjobs.registry import job

__version__ = "0.1.0"
__all__ = ["__version__", "job"]
