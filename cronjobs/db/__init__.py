"""The database: everything that knows SQL, connections or the server.

``queries/`` holds every statement cronjobs runs, each under a name, a file per concept;
``sql`` loads them with the canonical ``schema.sql`` and the numbered ``migrations/``;
``store`` and the stores of ``stores/`` (one per concept, on ``session``) are the only code
that runs SQL, one typed method per named query; ``connect`` opens connections; ``retry``
is the one home of retries for transient database errors; ``config`` says where the database is;
``migrate`` brings a database to the current schema; ``embedded`` runs the zero-setup
PostgreSQL. This package may import ``cronjobs.models``, ``cronjobs.errors`` and
``cronjobs.cron``, never ``core``, ``execution``, the tick or the CLI.
"""
