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

-- name: legacy_rows
-- The runs an upgrade from before version 11 has still to move out of the old tables
-- (NULL when they are gone: the upgrade is complete).
SELECT CASE WHEN to_regclass('job_runs_legacy') IS NULL THEN NULL
            ELSE (SELECT reltuples::bigint FROM pg_class
                  WHERE oid = to_regclass('job_runs_legacy')) END AS estimate;

-- name: move_legacy_runs
-- One batch of the old history moves to the day partitions, with its attempts (the update
-- of the stage moves the rows). It is kept one full retention from the upgrade, whatever
-- its age: an upgrade never drops history at once.
WITH batch AS (
    SELECT id FROM job_runs_legacy ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), runs AS (
    UPDATE job_runs AS r
    SET stage = CASE WHEN r.status IN ('succeeded', 'dead', 'cancelled') THEN 'history'
                     ELSE 'queue' END,
        retire_at = CASE WHEN r.status IN ('succeeded', 'dead', 'cancelled')
                         THEN %(now)s + cronjobs_keep(r.status, d.keep_succeeded,
                                                      d.keep_failed) END
    FROM job_definitions AS d
    WHERE r.stage = 'legacy' AND r.id IN (SELECT id FROM batch) AND d.id = r.definition_id
    RETURNING r.id, r.stage, r.retire_at
), attempts AS (
    UPDATE job_attempts AS a
    SET stage = runs.stage, retire_at = runs.retire_at
    FROM runs
    WHERE a.stage = 'legacy' AND a.run_id = runs.id
)
SELECT count(*) AS n FROM runs;

-- name: legacy_orphans
-- Attempts left in the old table whose run is gone (deleted by a prune before the upgrade
-- finished): they go with it.
DELETE FROM job_attempts_legacy AS a
WHERE NOT EXISTS (SELECT 1 FROM job_runs AS r WHERE r.id = a.run_id);

-- name: drop_legacy
-- The emptied old tables go (a short lock on job_runs and job_attempts: lock_timeout).
DROP TABLE job_runs_legacy, job_attempts_legacy;
