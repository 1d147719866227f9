-- Retention: the history's partitions made and dropped, what outlives them kept, and the
-- other records deleted in batches (cronjobs/db/stores/retention.py).

-- name: prune_skips
DELETE FROM job_skips WHERE id IN (
    SELECT id FROM job_skips WHERE decided_at < %(cutoff)s ORDER BY decided_at LIMIT %(batch)s)
RETURNING id;

-- name: prune_ticks
DELETE FROM job_ticks WHERE id IN (
    SELECT id FROM job_ticks WHERE started_at < %(cutoff)s AND status <> 'running'
    ORDER BY started_at LIMIT %(batch)s)
RETURNING id;

-- name: claim_upkeep
-- Whether this tick does the storage's upkeep now: the first to ask once the last upkeep
-- is %(every)s old (or in the future: a clock moved back) takes it, in one statement;
-- concurrent ticks queue on the row and find it taken.
UPDATE cronjobs_retention SET upkept_at = %(now)s
WHERE upkept_at IS NULL OR upkept_at <= %(now)s - %(every)s OR upkept_at > %(now)s
RETURNING true AS claimed;

-- name: maintenance_lock
-- One tick at a time looks after the storage (the others skip it: it is never urgent).
-- Held until the transaction ends.
SELECT pg_try_advisory_xact_lock(7161124402215412276) AS locked;

-- name: retentions_in_use
-- Every retention a run finishing now may get: the global ones and the jobs' own.
SELECT DISTINCT k FROM (
    SELECT succeeded AS k FROM cronjobs_retention
    UNION ALL SELECT failed FROM cronjobs_retention
    UNION ALL SELECT keep_succeeded FROM job_definitions WHERE keep_succeeded IS NOT NULL
    UNION ALL SELECT keep_failed FROM job_definitions WHERE keep_failed IS NOT NULL
) AS keeps;

-- name: history_partitions
-- The day partitions of the history, by table (job_runs_history, job_attempts_history).
SELECT p.relname AS parent, c.relname AS name
FROM pg_inherits AS i
JOIN pg_class AS c ON c.oid = i.inhrelid
JOIN pg_class AS p ON p.oid = i.inhparent
WHERE p.relname IN ('job_runs_history', 'job_attempts_history')
  AND p.relnamespace = current_schema()::regnamespace
  AND c.relname ~ '_[0-9]{8}$'
ORDER BY c.relname;

-- name: add_history_day
-- The day's partitions of the runs and the attempts (schema.sql: cronjobs_add_history_day).
SELECT cronjobs_add_history_day(%(day)s);

-- name: drop_history_day
-- Whether the day's partitions were dropped (false: not over yet by the database's clock,
-- left for a later tick; schema.sql: cronjobs_drop_history_day).
SELECT cronjobs_drop_history_day(%(day)s) AS dropped;

-- name: finished_in_queue
-- Runs that ended in the queue and are still there (a removed job's waiting runs, a one-off
-- run cancelled when it came due, or a run an older cronjobs finished), the oldest first:
-- upkeep moves them to the history the one way every run goes (finish_runs, moving them as
-- they are). (A cancel by an operator and a lost lease's last attempt move at once.)
SELECT id FROM job_runs_queue
WHERE status IN ('succeeded', 'dead', 'cancelled')
ORDER BY id
LIMIT %(limit)s;

-- name: keep_before_retiring
-- Before the history retiring before %(before)s is dropped, what must outlive it moves to
-- job_runs_kept: dead runs nobody acknowledged, and each job's latest success and latest
-- death. A job whose last success (last_succeeded_at, to within a minute) would retire by
-- then has its latest success among the retiring rows: one probe of its newest entries.
WITH due AS (
    SELECT r.id FROM job_runs_history AS r
    WHERE r.retire_at < %(before)s
      AND cronjobs_run_dead_unacknowledged(r.status, r.acknowledged_at, r.finished_at)
    UNION
    SELECT l.id
    FROM job_definitions AS d
    CROSS JOIN LATERAL (VALUES ('succeeded', d.last_succeeded_at), ('dead', d.last_failed_at))
         AS k (status, at)
    CROSS JOIN LATERAL (
        SELECT r.id FROM job_runs_history AS r
        WHERE r.definition_id = d.id AND r.status = k.status AND r.retire_at < %(before)s
        ORDER BY r.id DESC LIMIT 1) AS l
    WHERE d.removed_at IS NULL AND k.at IS NOT NULL
      AND k.at + cronjobs_keep(k.status, d.keep_succeeded, d.keep_failed)
          < %(before)s + interval '1 minute'
), runs AS (
    UPDATE job_runs AS r SET stage = 'kept'
    WHERE r.stage = 'history' AND r.retire_at < %(before)s AND r.id IN (SELECT id FROM due)
    RETURNING r.id
), attempts AS (
    UPDATE job_attempts AS a SET stage = 'kept'
    WHERE a.stage = 'history' AND a.retire_at < %(before)s
      AND a.run_id IN (SELECT id FROM runs)
)
SELECT count(*) AS n FROM runs;

-- name: retire_default_runs
-- Runs of the default partition (a day not made in time) retire row by row, in batches.
WITH gone AS (
    DELETE FROM job_runs_history_default
    WHERE id IN (SELECT id FROM job_runs_history_default WHERE retire_at < %(before)s
                 LIMIT %(batch)s)
    RETURNING id
), attempts AS (
    DELETE FROM job_attempts_history_default WHERE run_id IN (SELECT id FROM gone)
)
SELECT count(*) AS n FROM gone;

-- name: release_kept
-- Kept runs that are no longer needed: past their retention, acknowledged (or not dead),
-- and no longer their job's latest of their status (a later one finished), or of a
-- removed job.
WITH gone AS (
    DELETE FROM job_runs_kept AS k
    USING job_definitions AS d
    WHERE d.id = k.definition_id AND k.retire_at < %(before)s
      AND NOT cronjobs_run_dead_unacknowledged(k.status, k.acknowledged_at, k.finished_at)
      AND (d.removed_at IS NOT NULL
           OR k.status NOT IN ('succeeded', 'dead')
           OR (k.status = 'succeeded' AND d.last_succeeded_at > k.finished_at)
           OR (k.status = 'dead' AND d.last_failed_at > k.finished_at))
    RETURNING k.id
), attempts AS (
    DELETE FROM job_attempts_kept WHERE run_id IN (SELECT id FROM gone)
)
SELECT count(*) AS n FROM gone;

-- name: prune_notifications
-- Those in the outbox stay until they are sent or expire.
DELETE FROM job_notifications WHERE id IN (
    SELECT id FROM job_notifications
    WHERE sent_at < %(cutoff)s AND status <> 'pending' ORDER BY sent_at
    LIMIT %(batch)s)
RETURNING id;

-- name: retention_settings
SELECT succeeded, failed, skips, ticks, retired_before, updated_at FROM cronjobs_retention;

-- name: record_retired
-- Runs whose retention ended before this instant may have been dropped (backfill refuses
-- the slots they may have run).
UPDATE cronjobs_retention
SET retired_before = greatest(retired_before, %(before)s::timestamptz);

-- name: set_retention
UPDATE cronjobs_retention
SET succeeded = coalesce(%(succeeded)s, succeeded), failed = coalesce(%(failed)s, failed),
    skips = coalesce(%(skips)s, skips), ticks = coalesce(%(ticks)s, ticks),
    updated_at = %(now)s
RETURNING succeeded, failed, skips, ticks, retired_before, updated_at;

-- name: default_has_expired
-- Whether the default partition holds runs whose retention is over (usually it is empty).
SELECT EXISTS (SELECT 1 FROM job_runs_history_default WHERE retire_at < %(before)s)
    AS expired;
