"""The database: everything that knows SQL, connections or the server.

SQL by concept: ``queries/<concept>.sql`` holds the named statements of one concept
(definitions, materialise, queue, runs, ticks, groups, notifications, reports, retention,
schema, session); ``sql`` loads them with the canonical ``schema.sql`` and the numbered
``migrations/``. A store per concept runs them (``stores/<concept>.py``, one typed method per
statement) on the one base, ``session`` (the connection, the one-round-trip transaction,
error translation, reconnecting); ``store`` composes them (``store.queue``,
``store.definitions``, ...). ``connect`` opens connections; ``retry`` is the one home of
retries for transient database errors; ``config`` says where the database is; ``migrate``
brings a database to the current schema; ``embedded`` runs the zero-setup PostgreSQL. This
package may import ``cronjobs.models``, ``cronjobs.errors`` and ``cronjobs.cron``, never
``core``, ``execution``, the tick or the CLI.
"""
