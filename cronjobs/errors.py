"""The one exception tree of cronjobs.

Every error a user can cause derives from :class:`UsageError` (exit code 2); every
error the world causes (an unreachable database, an internal failure) derives from
:class:`CronjobsError` directly (exit code 1). psycopg errors are translated into
this tree at the store/db boundary, so nothing above it catches psycopg types.

An exception raised without a message takes its message from its class docstring.
One that names a command-line option or command may also carry the same message worded for
Python callers (``python=``): :class:`cronjobs.Client` raises that wording instead
(:meth:`CronjobsError.for_python`). What it advises typing at a terminal is kept apart
(``advice=``, as it follows the message: `` (see `cronjobs list`)``): the command line shows
the message with it, the dashboard without it (:attr:`CronjobsError.what`).
"""

from __future__ import annotations


class CronjobsError(Exception):
    """cronjobs failed."""

    exit_code: int = 1

    def __init__(self, message: str | None = None, *, advice: str | None = None,
                 python: str | None = None) -> None:
        if message is None:
            message = (self.__doc__ or type(self).__name__).strip().splitlines()[0]
        super().__init__(message if advice is None else message + advice)
        self.what = message  # the message without the advice
        self.advice = advice
        self.python_message = python

    @property
    def message(self) -> str:
        return str(self.args[0])

    def for_python(self) -> CronjobsError:
        """This error as a Python caller should read it: the same error with its Python
        wording (``force=True`` where the command line says ``--force``), or itself when
        the two read alike."""
        if self.python_message is None:
            return self
        worded = type(self)(self.python_message)  # (its own words: no terminal's advice)
        worded.__cause__ = self.__cause__
        return worded


class UsageError(CronjobsError):
    """Invalid input."""

    exit_code = 2


class ScheduleError(UsageError):
    """Invalid schedule."""


class InvalidDefinition(UsageError):
    """Invalid job definition."""


class JobNotFound(UsageError):
    """No such job."""


class RunNotFound(UsageError):
    """No such run."""


class Refused(UsageError):
    """The request does not fit the run's or the job's state."""


class ConfigurationError(UsageError):
    """cronjobs is not configured correctly."""


class EmbeddedUnavailable(ConfigurationError):
    """No database configured and the embedded PostgreSQL is not installed."""


class SchemaNotReady(ConfigurationError):
    """The database schema is missing or out of date."""


class Conflict(CronjobsError):
    """A concurrent change got there first (a unique key refused this one)."""


class CursorMovedBack(CronjobsError):
    """The database refused to move a job's cursor back: the slots behind it were decided,
    and a slot is never decided twice (no cronjobs command asks this: it means a writer is
    wrong, so nothing was written)."""


class LockBusy(CronjobsError):
    """A lock the storage's upkeep asked for was held too long by others: it tries again at
    the next tick (never an error a user sees)."""


class DatabaseUnavailable(CronjobsError):
    """Could not reach the database."""


class EmbeddedServerError(CronjobsError):
    """The embedded PostgreSQL server could not be started."""
