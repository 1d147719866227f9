"""The schedule in words, for the jobs table and a job's page.

MERGE: this is the one slot for the words column. Once ``cronjobs.cron.describe`` exists,
return ``describe(definition.schedule, definition.timezone, name=definition.name)`` here
(it may raise ScheduleError for a broken stored schedule: return None then). Until then
the column shows the cron expression alone.
"""

from __future__ import annotations

from cronjobs.models import Definition


def schedule_words(definition: Definition) -> str | None:
    """The job's schedule in words, or None when there are none to show."""
    return None
