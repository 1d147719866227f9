-- The schema's version and migrations (cronjobs/db/stores/schema.py).

-- name: session_setting
-- A setting of this session, NULL when it has none (e.g. the marker a connection sends as a
-- startup option, to learn whether its options reached the server: see connect.py).
SELECT current_setting(%(name)s, true) AS value;

-- name: migrations_table_exists
SELECT to_regclass('cronjobs_migrations') IS NOT NULL AS present;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM cronjobs_migrations;

-- name: migration_lock
-- Held until the migrating transaction ends: concurrent `cronjobs migrate` calls queue here.
SELECT pg_advisory_xact_lock(7161124402215412275);

-- name: record_migration
INSERT INTO cronjobs_migrations (version, name) VALUES (%(version)s, %(name)s);
