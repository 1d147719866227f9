"""Pure schedule math: cron expressions and time zones, and when a job's slots fall.

cronjobs reads schedules the way **Debian's cron** does (Vixie cron with Debian's
daylight-saving patch), evaluated on the wall clock of the job's IANA time zone.

Syntax
------
Five fields, ``minute hour day-of-month month day-of-week``:

* minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or ``jan``-``dec``,
  day-of-week 0-7 or ``sun``-``sat`` (0 and 7 are both Sunday); names are
  case-insensitive;
* each field is ``*``, a value, a range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n``
  (``a/n`` means ``a-max/n``), or a comma-separated list of those;
* when both day fields are restricted (neither starts with ``*``) a day matches if
  *either* matches: ``0 0 1 * mon`` runs on the 1st and on every Monday. When one of
  them starts with ``*`` both must match, so ``0 0 */2 * mon`` runs on Mondays that
  fall on an odd day of the month (Debian checks for a leading ``*``, not for "every");
* macros ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
  ``@hourly`` stand for ``0 0 1 1 *``, ``0 0 1 1 *``, ``0 0 1 * *``, ``0 0 * * 0``,
  ``0 0 * * *``, ``0 0 * * *`` and ``0 * * * *``;
* Jenkins-style ``H`` (a whole field: ``H``, ``H/15``, ``H(0-29)``, ``H(0-29)/10``)
  stands for a value derived from the job's name, so that jobs written ``H * * * *``
  spread over the hour while each one keeps the same minute (croniter's hash of the
  name and the field, so the fields vary independently). A bare ``H`` in the
  day-of-month field picks from 1-28, so such a job runs every month. For the rules
  below ``H`` counts as a fixed value (it does not start with ``*``).

There are no seconds or year fields (the tick runs once a minute), no ``@reboot`` and no
``?``. A schedule that can never fire (``0 0 30 2 *``, ``0 0 31W 2 *``) is rejected.

Day extensions
--------------
Debian's cron has none of these; they follow Quartz (and croniter and cronsim, where those
agree with Quartz), with the Debian day rule above. Each is an item of a day field's list on
its own (``1,15,L``, ``mon#1,fri#3``): it takes no range and no step, and ``H`` cannot be
part of it (``H`` is a whole field). Names and letters are case-insensitive.

* Day of month: ``L`` the last day; ``L-N`` (N 1-30) N days before it; ``NW`` (N 1-31) the
  weekday (Monday-Friday) nearest day N without leaving the month (a Saturday moves back to
  Friday, a Sunday on to Monday; ``1W`` on a Saturday is Monday the 3rd, ``31W`` on a Sunday
  is Friday the 29th); ``LW`` the last weekday. A day the month lacks matches nothing in it,
  as a plain ``31`` does: ``31W`` does not fire in April (croniter moves it to the 30th;
  write ``LW`` for the last weekday), ``L-30`` fires only on the 1st of 31-day months.
* Day of week: ``D#N`` (N 1-5) the Nth weekday D of the month (``fri#3``, ``5#3``; nothing
  in a month without a fifth); ``DL`` the last weekday D (``5L``, ``friL``). D is 0-7 or a
  name, numbered as in cron, croniter and cronsim (5 is Friday), not as in Quartz (where 1
  is Sunday); a bare ``L`` here is an error (Quartz reads it as Saturday), and so is
  croniter's ``L5`` (write ``5L``).
* The day rule is Debian's: with both day fields restricted and neither starting with ``*``
  a day matches if either does (``0 0 L * fri``: the last day and every Friday; cronsim
  agrees, croniter keeps ``#`` an intersection); when one starts with ``*`` both must
  (``0 0 */2 * fri#3``: the third Friday when it falls on an odd day).
* ``L``, ``W`` and ``#`` elsewhere are errors naming the field and where they belong.
* The DST rules below apply unchanged: the extensions choose days, the rules choose
  instants on them (``30 2 * * sunL`` in Europe/Berlin runs at 03:00 CEST on the last Sunday
  of March, and once, at 02:30 CEST, on the last Sunday of October).

Daylight-saving time
--------------------
Like Debian's cron, a job is either a *wildcard* job, whose minute or hour field starts
with ``*`` (``* 2 * * *``, ``*/15 * * * *``, ``0 * * * *``, ``0 */2 * * *``,
``@hourly``), or a *fixed-time* job: every other job (``30 2 * * *``, ``0 1-3 * * *``,
``0-59 0-23 * * *``, ``0,* 2 * * *``, ``@daily``). Only the leading character counts,
as in Debian.

* A **wildcard** job follows the clock. Its slots are the instants at which the zone's
  wall clock shows a matching minute. When the clocks fall back it runs in both
  copies of the repeated hour: ``0 * * * *`` in Europe/Berlin runs at 02:00 CEST and
  again at 02:00 CET on the last Sunday of October. When they spring forward nothing
  is invented for the skipped hour: on the last Sunday of March it runs at 01:00 CET
  and then at 03:00 CEST, not at 02:00.
* A **fixed-time** job runs once for each matching wall-clock time, on the first
  occurrence when that time happens twice: ``30 2 * * *`` in Europe/Berlin runs once on
  the fall-back night, at 02:30 CEST (00:30 UTC), not again at 02:30 CET. A matching
  time that the clock skips runs right after the gap, at the first instant of the new
  offset: ``30 2 * * *`` runs at 03:00 CEST (01:00 UTC) on the spring-forward day.
  Several skipped times collapse into that one run (``0,30 2 * * *`` runs once at
  03:00), and a slot at the end of the gap is that same run, not a second one
  (``0 2,3 * * *`` runs once, at 03:00 CEST).
* Debian's cron catches up only after jumps shorter than three hours, taking longer ones
  for a reset clock. cronjobs knows a gap comes from the zone's rules, so it treats every
  gap alike: when Pacific/Apia skipped 30 December 2011, a ``0 12 * * *`` job ran once,
  at the first instant of 31 December.

Every function takes and returns aware datetimes; slots come back in UTC, strictly
increasing, each instant at most once. Naive datetimes are a programming error
(``ValueError``).

Layout
------
``fields`` reads one field as Debian does (and the day extensions), ``hashing`` expands
``H`` (croniter's hash, worked out directly), ``expressions`` validates and compiles a
whole expression, ``matching`` works out each month's matching days and walks the
matching wall-clock minutes, ``zones`` maps wall times to instants across DST, and
``schedule`` puts them together as :class:`Schedule`. ``describe`` says a schedule in
words (with cron-descriptor); it is not imported here, so that a tick never loads it.
This package is pure: it reads no clock, no database and no environment, and imports
nothing of cronjobs but ``cronjobs.errors``.
"""

from cronjobs.cron.expressions import MACROS, MAX_LENGTH, hash_fields
from cronjobs.cron.schedule import Schedule, parse
from cronjobs.cron.zones import check_timezone

__all__ = ["MACROS", "MAX_LENGTH", "Schedule", "check_timezone", "hash_fields", "parse"]
