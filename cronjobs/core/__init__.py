"""What cronjobs decides: job definitions, turning due slots into runs (materialisation),
what an operator does to runs, ``explain``, health and metrics, pruning history.

Every decision takes its instant as a parameter and reaches the database through
``cronjobs.db.store``. This package may import ``cronjobs.db``, ``cronjobs.cron``,
``cronjobs.models`` and ``cronjobs.errors``; never ``execution``, the tick or the CLI.
"""
