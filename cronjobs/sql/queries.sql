-- Every SQL statement cronjobs runs, each under a name. store.py runs them by name;
-- a test checks that every name here is used and every name used exists.

-- name: now
-- The instant of this transaction, from the database clock (the truth in production).
SELECT now() AS now;

-- name: migrations_table_exists
SELECT to_regclass('cronjobs_migrations') IS NOT NULL AS present;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM cronjobs_migrations;

-- name: migration_lock
-- Held until the migrating transaction ends: concurrent `cronjobs migrate` calls queue here.
SELECT pg_advisory_xact_lock(7161124402215412275);

-- name: record_migration
INSERT INTO cronjobs_migrations (version, name) VALUES (%(version)s, %(name)s);

-- name: upsert_definition
-- Creates the job, or updates it when anything differs. A new schedule or zone restarts
-- the cursor from now; an unchanged definition is not touched (no row returned).
INSERT INTO job_definitions AS d (
    name, schedule, timezone, kind, handler, command, payload, catchup, catchup_limit,
    starting_deadline, overlap, max_attempts, backoff, backoff_max, timeout, lease,
    cursor_at, next_due_at
) VALUES (
    %(name)s, %(schedule)s, %(timezone)s, %(kind)s, %(handler)s, %(command)s, %(payload)s,
    %(catchup)s, %(catchup_limit)s, %(starting_deadline)s, %(overlap)s, %(max_attempts)s,
    %(backoff)s, %(backoff_max)s, %(timeout)s, %(lease)s, %(now)s, %(next_due_at)s
)
ON CONFLICT (name) WHERE removed_at IS NULL DO UPDATE SET
    schedule = excluded.schedule,
    timezone = excluded.timezone,
    kind = excluded.kind,
    handler = excluded.handler,
    command = excluded.command,
    payload = excluded.payload,
    catchup = excluded.catchup,
    catchup_limit = excluded.catchup_limit,
    starting_deadline = excluded.starting_deadline,
    overlap = excluded.overlap,
    max_attempts = excluded.max_attempts,
    backoff = excluded.backoff,
    backoff_max = excluded.backoff_max,
    timeout = excluded.timeout,
    lease = excluded.lease,
    cursor_at = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
            OR d.invalid_reason IS NOT NULL
        THEN excluded.cursor_at ELSE d.cursor_at END,
    next_due_at = CASE
        WHEN (d.schedule, d.timezone) IS DISTINCT FROM (excluded.schedule, excluded.timezone)
            OR d.invalid_reason IS NOT NULL
        THEN excluded.next_due_at ELSE d.next_due_at END,
    invalid_reason = NULL,
    updated_at = excluded.updated_at
WHERE (d.schedule, d.timezone, d.kind, d.handler, d.command, d.payload, d.catchup,
       d.catchup_limit, d.starting_deadline, d.overlap, d.max_attempts, d.backoff,
       d.backoff_max, d.timeout, d.lease)
    IS DISTINCT FROM
      (excluded.schedule, excluded.timezone, excluded.kind, excluded.handler, excluded.command,
       excluded.payload, excluded.catchup, excluded.catchup_limit, excluded.starting_deadline,
       excluded.overlap, excluded.max_attempts, excluded.backoff, excluded.backoff_max,
       excluded.timeout, excluded.lease)
   OR d.invalid_reason IS NOT NULL
RETURNING d.*, (xmax = 0) AS created;

-- name: definition_by_name
SELECT * FROM job_definitions WHERE name = %(name)s AND removed_at IS NULL;

-- name: definition_by_name_for_update
SELECT * FROM job_definitions WHERE name = %(name)s AND removed_at IS NULL FOR UPDATE;

-- name: list_definitions
SELECT d.*, last.status AS last_run_status,
       coalesce(last.finished_at, last.started_at, last.scheduled_for) AS last_run_at
FROM job_definitions AS d
LEFT JOIN LATERAL (
    SELECT r.status, r.finished_at, r.started_at, r.scheduled_for
    FROM job_runs AS r
    WHERE r.definition_id = d.id
    ORDER BY r.id DESC
    LIMIT 1
) AS last ON true
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: recent_runs
SELECT * FROM job_runs WHERE definition_id = %(definition_id)s ORDER BY id DESC LIMIT %(limit)s;

-- name: pause_definition
UPDATE job_definitions
SET paused_at = coalesce(paused_at, %(now)s),
    paused_until = %(until)s,
    pause_note = %(note)s,
    updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: resume_definition
-- Slots decided while paused are recorded by the caller; the cursor continues from now.
UPDATE job_definitions
SET paused_at = NULL,
    paused_until = NULL,
    pause_note = NULL,
    cursor_at = greatest(cursor_at, %(now)s),
    next_due_at = %(next_due_at)s,
    updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: record_skip
INSERT INTO job_skips (definition_id, first_slot, last_slot, slot_count, reason, detail, tick_id,
                       decided_at)
VALUES (%(definition_id)s, %(first_slot)s, %(last_slot)s, %(slot_count)s, %(reason)s,
        %(detail)s, %(tick_id)s, %(now)s);

-- name: remove_definition
UPDATE job_definitions SET removed_at = %(now)s, next_due_at = NULL, updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: cancel_waiting_runs
-- Runs of a removed job that have not started will never start.
UPDATE job_runs
SET status = 'cancelled', finished_at = %(now)s, error = %(reason)s, updated_at = %(now)s
WHERE definition_id = %(definition_id)s AND status IN ('queued', 'failed');

-- name: request_cancel_running_runs
-- A running run is stopped by its holder at its next heartbeat.
UPDATE job_runs SET cancel_requested_at = %(now)s, updated_at = %(now)s
WHERE definition_id = %(definition_id)s AND status = 'running' AND cancel_requested_at IS NULL;
