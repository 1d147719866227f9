-- Runs and their attempts as operators see and change them (cronjobs/db/stores/runs.py).

-- name: recent_runs
-- A job's latest runs: a probe per partition of its (definition_id, id) index, merged
-- newest first. The job is named by a range on purpose (see dashboard_jobs in
-- reports.sql): a plan kept for the statement never reads a partition whole by its id
-- index when the partition's statistics say one job fills it.
SELECT * FROM job_runs
WHERE definition_id BETWEEN %(definition_id)s AND %(definition_id)s
ORDER BY definition_id DESC, id DESC
LIMIT %(limit)s;

-- name: timeline_start
-- The dashboard's timeline of a job reads at most its %(runs)s newest runs of
-- [%(start)s, %(end)s]: the slot of its %(runs)s-th newest run there, the latest over the
-- definitions that carried the name (NULL when none has that many: the whole range is
-- read). Each definition's runs are read newest slot first from each partition's
-- (definition_id, scheduled_for) index, merged, and stopped after %(runs)s entries. The
-- job is named by "=" (unlike recent_runs): the job and the range of slots together
-- position each partition's scan, which reads the job's entries of the range alone (with
-- a range on the job, every entry of the job in the partition: 2-3 ms a partition for a
-- job with a tenth of 10,000,000 runs, 54 ms in all against 7.5 ms); the plan stays the
-- same on a day one job fills (test_dashboard_plans.py).
SELECT max(nth.slot) AS slot
FROM job_definitions AS d
CROSS JOIN LATERAL (
    SELECT r.scheduled_for AS slot FROM job_runs AS r
    WHERE r.definition_id = d.id
      AND r.scheduled_for BETWEEN %(start)s AND %(end)s
    ORDER BY r.definition_id DESC, r.scheduled_for DESC
    OFFSET %(runs)s - 1 LIMIT 1
) AS nth
WHERE d.name = %(name)s;

-- name: run_by_id
SELECT r.*, d.name AS job, d.removed_at AS job_removed_at
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.id = %(id)s;

-- name: run_by_id_for_update
SELECT r.*, d.name AS job, d.removed_at AS job_removed_at
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.id = %(id)s
FOR UPDATE OF r;

-- name: attempts_of_run
-- A run's attempts: the rows of those that ended, and the one running now
-- (job_attempts_running: its row is written when it ends).
SELECT * FROM job_attempts WHERE run_id = %(run_id)s
UNION ALL
SELECT * FROM job_attempts_running WHERE run_id = %(run_id)s
ORDER BY attempt;

-- name: attempts_of_runs
-- (attempts_of_run for several runs)
SELECT * FROM job_attempts WHERE run_id = ANY(%(run_ids)s::bigint[])
UNION ALL
SELECT * FROM job_attempts_running WHERE run_id = ANY(%(run_ids)s::bigint[])
ORDER BY run_id, attempt;

-- name: attempts_of_placed_runs
-- The attempts of runs read just before, found where their runs are (an attempt's stage
-- and retire_at are its run's): a run of the history by one probe of the (run_id,
-- attempt) index of its own day's partition (the others pruned as the join runs), never
-- by a probe of every day's, nor by reading the days whole (as attempts_of_runs does for
-- a thousand runs). A run read elsewhere (waiting, running, kept) is looked for in every
-- partition, as one that moved since is found there too.
SELECT a.*
FROM unnest(%(run_ids)s::bigint[], %(stages)s::text[], %(retire_at)s::timestamptz[])
    AS r(id, stage, retire_at)
JOIN job_attempts_history AS a ON a.run_id = r.id AND a.retire_at = r.retire_at
WHERE r.stage = 'history'
UNION ALL
SELECT a.*
FROM unnest(%(run_ids)s::bigint[], %(stages)s::text[]) AS r(id, stage)
JOIN job_attempts AS a ON a.run_id = r.id
WHERE r.stage <> 'history'
UNION ALL
-- (the attempt running now: job_attempts_running)
SELECT a.*
FROM unnest(%(run_ids)s::bigint[], %(stages)s::text[]) AS r(id, stage)
JOIN job_attempts_running AS a ON a.run_id = r.id
WHERE r.stage = 'queue'
ORDER BY run_id, attempt;

-- name: requeue_run
-- `cronjobs retry`: a failed, dead or cancelled run goes back to the queue now, with more
-- attempts, keeping its history (from the history or the kept runs: the update of its
-- stage moves it). Retrying a dead run acknowledges it. (requeue_attempts follows.)
UPDATE job_runs
SET stage = 'queue', retire_at = NULL, status = 'queued', eligible_at = %(now)s, max_attempts = attempt + %(attempts)s,
    finished_at = NULL, cancel_requested_at = NULL, retry_count = retry_count + 1,
    retried_at = %(now)s, updated_at = %(now)s,
    acknowledged_at = CASE WHEN status = 'dead' THEN %(now)s ELSE acknowledged_at END,
    acknowledged_by = CASE WHEN status = 'dead' THEN %(by)s ELSE acknowledged_by END
WHERE id = %(id)s
RETURNING *;

-- name: requeue_attempts
-- The attempts of a run sent back to the queue go with it.
UPDATE job_attempts SET stage = 'queue', retire_at = NULL
WHERE run_id = %(id)s AND stage <> 'queue';

-- name: acknowledge_run
-- `cronjobs ack RUN_ID`: a person saw this dead run; status --check turns green for it.
-- (Never acknowledged before it died: a tick's clock may run a little ahead of ours.)
UPDATE job_runs
SET acknowledged_at = greatest(%(now)s, finished_at), acknowledged_by = %(by)s,
    updated_at = %(now)s
WHERE id = %(id)s AND cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at)
RETURNING *;

-- name: acknowledge_dead_runs
-- `cronjobs ack --all NAME`: every dead run of the job that nobody acknowledged yet.
UPDATE job_runs
SET acknowledged_at = greatest(%(now)s, finished_at), acknowledged_by = %(by)s,
    updated_at = %(now)s
WHERE definition_id = %(definition_id)s
  AND cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at)
RETURNING *;

-- name: insert_manual_run
-- A run outside the schedule: `cronjobs trigger`, or `cronjobs retry --force` of a run that
-- succeeded (trigger 'retry', same slot). Not covered by the slot key, on purpose.
INSERT INTO job_runs (definition_id, scheduled_for, trigger, payload, max_attempts, exclusive,
                      eligible_at, retry_of)
VALUES (%(definition_id)s, %(scheduled_for)s, %(trigger)s, %(payload)s, %(max_attempts)s,
        %(exclusive)s, %(now)s, %(retry_of)s)
RETURNING *;

-- name: cancel_waiting_run
UPDATE job_runs
SET status = 'cancelled', finished_at = %(now)s, error = 'cancelled by an operator',
    updated_at = %(now)s
WHERE id = %(id)s AND status IN ('scheduled', 'queued', 'failed')
RETURNING *;

-- name: request_cancel_run
UPDATE job_runs SET cancel_requested_at = %(now)s, updated_at = %(now)s
WHERE id = %(id)s AND status = 'running'
RETURNING *;

-- name: list_runs
SELECT r.*, d.name AS job, d.removed_at AS job_removed_at
FROM job_runs AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE (%(name)s::text IS NULL OR d.name = %(name)s::text)
  AND (%(statuses)s::text[] IS NULL OR r.status = ANY(%(statuses)s::text[]))
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
ORDER BY r.id DESC
LIMIT %(limit)s;
