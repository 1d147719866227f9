"""Running claimed runs: the executor (reclaim, claim, run, heartbeat, finish, all fenced by
the lease token); ``runners/``, the run modes behind one ``Runner`` protocol (``shell``,
``forked`` from the ``template`` process, ``interpreter``, ``inprocess``: handlers in the
tick's own threads); the ``watchdog``; ``processes/``, the helper processes (``handler``,
``template``, ``fence``); the handler registry behind ``@cronjobs.job``, what a job
receives (``context``) and alert commands (``alerts``).

This package may import ``cronjobs.db``, ``cronjobs.models`` and ``cronjobs.errors``; never
``core``, the tick or the CLI.
"""
