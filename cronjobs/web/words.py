"""The schedule in words, for the jobs table and a job's page (the same wording as
`cronjobs describe`, from cronjobs.cron.describe)."""

from __future__ import annotations

from cronjobs.cron.describe import describe
from cronjobs.errors import ScheduleError
from cronjobs.models import Definition


def schedule_words(definition: Definition) -> str | None:
    """The job's schedule in words with its zone, or None for a stored schedule that can no
    longer be read (the page shows the job as invalid instead)."""
    try:
        return describe(definition.schedule, definition.timezone, name=definition.name)
    except ScheduleError:
        return None
