"""Running claimed runs: the executor (reclaim, claim, run, heartbeat, finish, all fenced by
the lease token), the job processes and their watchdog (``process``, ``child``), Python
handlers in the tick's own threads (``inprocess``), the handler registry behind
``@cronjobs.job``, what a job receives (``context``) and alert commands (``alerts``).

This package may import ``cronjobs.db``, ``cronjobs.models`` and ``cronjobs.errors``; never
``core``, the tick or the CLI.
"""
