-- Reports: status, metrics, the dashboard's numbers (cronjobs/db/stores/reports.py).

-- name: waiting_for_handlers
-- Due handler runs that wait for a handler nobody loaded, per handler: not among
-- %(handlers)s (a tick's own), or when that is NULL, among the handlers of no tick started
-- after %(since)s. A paused job's runs wait for its resumption instead (as claim_runs).
-- The jobs are found first (a handler job nobody loaded), then only their waiting runs are
-- read (job_runs_queue_definition_idx), never the whole queue: every tick asks this.
SELECT d.handler, sum(w.runs)::bigint AS runs, min(w.oldest) AS oldest
FROM job_definitions AS d
CROSS JOIN LATERAL (
    SELECT count(*) AS runs, min(r.eligible_at) AS oldest
    FROM job_runs_queue AS r
    WHERE r.definition_id = d.id AND cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)
      AND cronjobs_job_lets_run(r.trigger, d.paused_at, d.paused_until, %(now)s)
) AS w
WHERE d.kind = 'handler'
  AND (%(definition_id)s::bigint IS NULL OR d.id = %(definition_id)s::bigint)
  AND d.handler <> ALL(coalesce(%(handlers)s::text[], ARRAY(
      SELECT DISTINCT h FROM job_ticks AS t CROSS JOIN LATERAL unnest(t.handlers) AS h
      WHERE t.started_at > %(since)s)))
  AND w.runs > 0
GROUP BY d.handler
ORDER BY d.handler;

-- name: health
-- One row of numbers for `cronjobs status` and `cronjobs metrics`.
SELECT
    (SELECT max(started_at) FROM job_ticks) AS last_tick_at,
    (SELECT worker FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_worker,
    (SELECT status FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_status,
    (SELECT count(*) FROM job_ticks WHERE started_at > %(now)s - interval '1 hour')
        AS ticks_last_hour,
    (SELECT count(*) FROM job_runs_queue
     WHERE cronjobs_run_is_due(status, eligible_at, %(now)s)) AS backlog,
    (SELECT min(eligible_at) FROM job_runs_queue
     WHERE cronjobs_run_is_due(status, eligible_at, %(now)s)) AS backlog_oldest,
    (SELECT count(*) FROM job_runs_queue WHERE status = 'running') AS running,
    (SELECT count(*) FROM job_runs_queue
     WHERE status = 'failed' AND updated_at > %(now)s - interval '1 day') AS failed_last_day,
    (SELECT count(*) FROM job_runs
     WHERE status = 'dead' AND finished_at > %(now)s - interval '1 day') AS dead_last_day,
    (SELECT count(*) FROM job_definitions WHERE removed_at IS NULL) AS jobs,
    (SELECT count(*) FROM job_ticks
     WHERE status = 'lost' AND finished_at > %(now)s - interval '1 day') AS lost_ticks_last_day,
    (SELECT worker FROM job_ticks WHERE status = 'lost'
     ORDER BY finished_at DESC LIMIT 1) AS last_lost_tick_worker,
    (SELECT tick_at FROM job_ticks WHERE status = 'lost'
     ORDER BY finished_at DESC LIMIT 1) AS last_lost_tick_at;

-- name: start_lateness
-- Start lateness as a service level (`status`, /metrics, the dashboard): p50 and p99 of
-- started_at - scheduled_for, in seconds, of the runs started in the hour and in the day
-- before %(now)s (%(hour)s, %(day)s). Scheduled and manual runs only (a backfilled run is
-- late on purpose), on their first attempt: a run's started_at is its latest attempt's, and
-- a retry starts when its backoff says, so a run retried is left out. Each partition is
-- read by a range of an index bounded by the day, never whole: the history and the kept
-- runs by their finish (a run that started in the window finished in it:
-- job_runs_history_finished_idx, job_runs_kept_finished_idx), the runs still running by
-- their start (job_runs_queue_running_idx). The cost is that of the day's runs
-- (test_lateness.py checks the plan; docs/concurrency.md, "Lateness", the cost).
WITH started AS (
    SELECT h.started_at, h.scheduled_for FROM job_runs_history AS h
    WHERE h.finished_at >= %(day)s AND h.started_at >= %(day)s AND h.started_at <= %(now)s
      AND h.attempt = 1 AND h.trigger IN ('schedule', 'manual')
    UNION ALL
    SELECT k.started_at, k.scheduled_for FROM job_runs_kept AS k
    WHERE k.finished_at >= %(day)s AND k.started_at >= %(day)s AND k.started_at <= %(now)s
      AND k.attempt = 1 AND k.trigger IN ('schedule', 'manual')
    UNION ALL
    SELECT q.started_at, q.scheduled_for FROM job_runs_queue AS q
    WHERE q.status = 'running' AND q.started_at >= %(day)s AND q.started_at <= %(now)s
      AND q.attempt = 1 AND q.trigger IN ('schedule', 'manual')
), late AS (
    SELECT started_at >= %(hour)s AS last_hour,
           extract(epoch FROM started_at - scheduled_for)::float8 AS seconds
    FROM started
)
SELECT count(*) FILTER (WHERE last_hour)::int AS hour_runs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE last_hour)
           AS hour_p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE last_hour)
           AS hour_p99,
       count(*)::int AS day_runs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) AS day_p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY seconds) AS day_p99
FROM late;

-- name: running_runs
SELECT r.id, d.name AS job, r.attempt, r.lease_owner, r.started_at, r.heartbeat_at,
       r.lease_expires_at, r.cancel_requested_at
FROM job_runs_queue AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'running'
ORDER BY r.started_at;

-- name: job_health
-- Per job, what status and /healthz judge: the definition's own columns (its last success
-- to within a minute: last_succeeded_at) and its dead runs nobody acknowledged, counted
-- from the partial index of each partition that holds them (they are few). Never a probe
-- per job into the history. Unless %(every)s, only the jobs that may have a problem, each
-- kind found through its own index (cheap with 100,000 jobs): invalid ones, those with dead
-- runs, those with a slot due, and those with a slot come since their last success (the
-- test of health.py's _surely_on_time, written out: job_definitions_unsucceeded_idx).
WITH dead AS (
    SELECT definition_id, count(*) AS n, max(id) AS latest
    FROM job_runs
    WHERE status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at)
    GROUP BY definition_id
), candidates AS (
    SELECT id FROM job_definitions WHERE %(every)s AND removed_at IS NULL
    UNION
    SELECT id FROM job_definitions
    WHERE NOT %(every)s AND invalid_reason IS NOT NULL AND removed_at IS NULL
    UNION
    SELECT definition_id FROM dead WHERE NOT %(every)s
    UNION
    SELECT id FROM job_definitions
    WHERE NOT %(every)s AND removed_at IS NULL AND next_due_at <= %(now)s
    UNION
    SELECT id FROM job_definitions
    WHERE NOT %(every)s AND removed_at IS NULL AND paused_at IS NULL
      AND (last_succeeded_at IS NULL OR last_succeeded_at < cursor_at)
      AND cursor_at > greatest(created_at, schedule_since)
)
SELECT d.id, d.name, d.schedule, d.timezone, d.created_at, d.schedule_since, d.paused_at,
       d.invalid_reason, d.last_succeeded_at AS last_success_at,
       coalesce(dead.n, 0) AS dead_unacknowledged, dead.latest AS latest_dead_id,
       d.cursor_at, d.next_due_at
FROM job_definitions AS d
JOIN candidates AS c ON c.id = d.id
LEFT JOIN dead ON dead.definition_id = d.id
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: last_success
-- A job's latest success, exactly: the newest entries of its index in each partition.
SELECT r.finished_at FROM job_runs AS r
WHERE r.definition_id = %(definition_id)s AND r.status = 'succeeded' AND r.stage <> 'queue'
ORDER BY r.id DESC
LIMIT 1;

-- name: job_stats
-- Per job: last success, last run's duration, the lateness of its last scheduled run (its
-- first attempt's start minus its slot: backfilled, manual and retried runs are not late),
-- runs by status and retries (of the runs not finished yet and those finished since
-- %(since)s), and dead runs nobody acknowledged yet. Each number is an index probe per job
-- or a range of recent rows: the cost does not grow with the history (a scrape every 15
-- seconds must not read a million old runs).
WITH recent AS (
    SELECT definition_id, status, count(*) AS n, sum(greatest(attempt - 1, 0)) AS retries
    FROM job_runs WHERE finished_at >= %(since)s AND stage <> 'queue'
    GROUP BY definition_id, status
    UNION ALL
    SELECT definition_id, status, count(*) AS n, sum(greatest(attempt - 1, 0)) AS retries
    FROM job_runs_queue WHERE status IN ('queued', 'running', 'failed')
    GROUP BY definition_id, status
), per_job AS (
    SELECT definition_id, jsonb_object_agg(status, n) AS runs_by_status,
           sum(retries) AS retries
    FROM (SELECT definition_id, status, sum(n) AS n, sum(retries) AS retries
          FROM recent GROUP BY definition_id, status) AS s
    GROUP BY definition_id
)
SELECT d.id, d.name, d.schedule, d.timezone, d.created_at, d.schedule_since, d.paused_at,
       d.invalid_reason, d.cursor_at, d.next_due_at,
       (SELECT r.finished_at FROM job_runs AS r WHERE r.definition_id = d.id
            AND r.status = 'succeeded' AND r.stage <> 'queue'
        ORDER BY r.id DESC LIMIT 1) AS last_success_at,
       last.finished_at - last.started_at AS last_duration,
       -- never negative (a run started before its slot is on time, not early)
       greatest(scheduled.started_at - scheduled.scheduled_for, interval '0')
           AS last_lateness,
       (SELECT count(*) FROM job_runs WHERE definition_id = d.id AND status = 'dead'
            AND (acknowledged_at IS NULL OR acknowledged_at < finished_at))
           AS dead_unacknowledged,
       (SELECT max(id) FROM job_runs WHERE definition_id = d.id AND status = 'dead'
            AND (acknowledged_at IS NULL OR acknowledged_at < finished_at))
           AS latest_dead_id,
       coalesce(per_job.runs_by_status, '{}'::jsonb) AS runs_by_status,
       coalesce(per_job.retries, 0) AS retries
FROM job_definitions AS d
LEFT JOIN per_job ON per_job.definition_id = d.id
-- the job's last finished run, and its last finished scheduled run with its first
-- attempt: the newest entries of the job's index in each partition of the history
LEFT JOIN LATERAL (
    SELECT r.started_at, r.finished_at FROM job_runs AS r
    WHERE r.definition_id = d.id AND r.stage <> 'queue'
    ORDER BY r.id DESC LIMIT 1
) AS last ON true
LEFT JOIN LATERAL (
    SELECT r.scheduled_for,
           (SELECT a.started_at FROM job_attempts AS a
            WHERE a.run_id = r.id AND a.attempt = 1) AS started_at
    FROM job_runs AS r
    WHERE r.definition_id = d.id AND r.stage <> 'queue' AND r.trigger = 'schedule'
    ORDER BY r.id DESC LIMIT 1
) AS scheduled ON true
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: dashboard_jobs
-- One page of the dashboard's jobs table, in name order after %(after)s (keyset paging:
-- job_definitions_name_key), optionally only the names containing %(search)s; with each
-- job's last %(strip)s runs, oldest first.
-- The page's names are found first from the names' index alone (an index-only scan: a
-- search reads names, never the definitions' rows), then joined to their rows.
-- Each job's strip is a probe per partition of its (definition_id, id) index, merged
-- newest first and stopped after %(strip)s rows, never its whole history. The job is
-- named by a range (BETWEEN d.id AND d.id), not "= d.id", on purpose: with "=" the
-- planner takes the job for a constant, and where a partition's statistics say one job
-- fills it (the partition of a day when a single job failed) it reads that partition
-- whole, newest id first, filtering on the job, for every job of the page
-- (test_query_plans.py keeps the plan).
WITH page AS (
    SELECT name FROM job_definitions
    WHERE removed_at IS NULL AND name > %(after)s
      AND (%(search)s::text IS NULL OR strpos(lower(name), lower(%(search)s::text)) > 0)
    ORDER BY name
    LIMIT %(limit)s
)
SELECT d.*, strip.run_ids, strip.run_statuses, strip.run_slots, strip.run_times
FROM page
JOIN job_definitions AS d ON d.name = page.name AND d.removed_at IS NULL
LEFT JOIN LATERAL (
    SELECT array_agg(r.id ORDER BY r.id) AS run_ids,
           array_agg(r.status ORDER BY r.id) AS run_statuses,
           array_agg(r.scheduled_for ORDER BY r.id) AS run_slots,
           array_agg(coalesce(r.finished_at, r.started_at, r.scheduled_for) ORDER BY r.id)
               AS run_times
    FROM (SELECT id, status, scheduled_for, finished_at, started_at, eligible_at
          FROM job_runs WHERE definition_id BETWEEN d.id AND d.id
          ORDER BY definition_id DESC, id DESC LIMIT %(strip)s) AS r
) AS strip ON true
ORDER BY d.name;

-- name: count_jobs
-- The jobs matching the dashboard's search (all of them without one), counted from the
-- names' index alone (an index-only scan of job_definitions_name_key).
SELECT count(*) AS n FROM job_definitions
WHERE removed_at IS NULL
  AND (%(search)s::text IS NULL OR strpos(lower(name), lower(%(search)s::text)) > 0);
