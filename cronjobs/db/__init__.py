"""The database: everything that knows SQL, connections or the server.

``queries.sql`` holds every statement cronjobs runs, each under a name; ``sql`` loads it with
the canonical ``schema.sql`` and the numbered ``migrations/``; ``store`` is the only code
that runs SQL, one typed method per named query; ``connect`` opens connections; ``retry``
is the one home of retries for transient database errors; ``config`` says where the database is;
``migrate`` brings a database to the current schema; ``embedded`` runs the zero-setup
PostgreSQL. This package may import ``cronjobs.models``, ``cronjobs.errors`` and
``cronjobs.cron``, never ``core``, ``execution``, the tick or the CLI.
"""
