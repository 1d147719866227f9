-- Reports: status, metrics, the dashboard's numbers (cronjobs/db/stores/reports.py).

-- name: health
-- One row of numbers for `cronjobs status` and `cronjobs metrics`. The jobs are counted
-- only with %(count_jobs)s (a subquery in a CASE is run only when it is reached: counting
-- 100,000 definitions takes 5-10 ms, which the server's verdict, showing no count, skips).
SELECT
    (SELECT max(started_at) FROM job_ticks) AS last_tick_at,
    (SELECT worker FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_worker,
    (SELECT status FROM job_ticks ORDER BY started_at DESC LIMIT 1) AS last_tick_status,
    (SELECT count(*) FROM job_ticks WHERE started_at > %(now)s - interval '1 hour')
        AS ticks_last_hour,
    (SELECT count(*) FROM job_runs_queue
     WHERE cronjobs_run_is_due(status, eligible_at, %(now)s)) AS backlog,
    -- (the first due entry of each half of job_runs_queue_claim_idx, backfills apart: a
    -- min() over the due runs read every one of them, 100,000 in a queue nobody claims)
    (SELECT min(o.eligible_at) FROM (VALUES (false), (true)) AS b (backfill)
     CROSS JOIN LATERAL (
         SELECT q.eligible_at FROM job_runs_queue AS q
         WHERE (q.trigger = 'backfill') = b.backfill
           AND cronjobs_run_is_due(q.status, q.eligible_at, %(now)s)
         ORDER BY q.eligible_at LIMIT 1) AS o) AS backlog_oldest,
    (SELECT count(*) FROM job_runs_queue WHERE status = 'running') AS running,
    (SELECT count(*) FROM job_runs_queue
     WHERE status = 'failed' AND updated_at > %(now)s - interval '1 day') AS failed_last_day,
    -- (by job_runs_history_dead_idx: never the day's runs that succeeded)
    (SELECT count(*) FROM job_runs
     WHERE status = 'dead' AND finished_at > %(now)s - interval '1 day') AS dead_last_day,
    CASE WHEN %(count_jobs)s THEN
        (SELECT count(*) FROM job_definitions WHERE removed_at IS NULL) END AS jobs,
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
-- (test_lateness.py checks the plan; docs/explanation/concurrency.md, "Lateness", the cost).
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
       r.lease_expires_at, r.cancel_requested_at, d.removed_at AS job_removed_at
FROM job_runs_queue AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'running'
ORDER BY r.started_at;

-- name: job_health
-- Every job, as `status` lists it: the definition's own columns (its last success to
-- within a minute: last_succeeded_at) and its dead runs nobody acknowledged, counted from
-- the partial index of each partition that holds them (they are few). Never a probe per
-- job into the history. What is wrong with them is job_problems' to say.
WITH dead AS (
    SELECT definition_id, count(*) AS n, max(id) AS latest
    FROM job_runs
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at)
    GROUP BY definition_id
)
SELECT d.id, d.name, d.schedule, d.timezone, d.created_at, d.schedule_since, d.paused_at,
       d.invalid_reason, d.last_succeeded_at AS last_success_at,
       coalesce(dead.n, 0) AS dead_unacknowledged, dead.latest AS latest_dead_id,
       d.cursor_at, d.next_due_at
FROM job_definitions AS d
LEFT JOIN dead ON dead.definition_id = d.id
WHERE d.removed_at IS NULL
ORDER BY d.name;

-- name: health_schedules
-- The schedules the verdict must evaluate (core/health.py works out each one's slot before
-- its latest, then job_problems judges with them): those of the valid, unpaused jobs that
-- may be overdue, by schedule and time zone, and by name for a schedule with an H field
-- (its slots differ per job: as cron.Schedule reads H, in either case, in any schedule but
-- an @ nickname). A job may be overdue when a slot of it is due (job_definitions_due_idx)
-- or one has come since its last success as the definition knows it: their schedules are
-- read skipping along job_definitions_unsucceeded_idx, one probe per distinct schedule,
-- never one per job. Many jobs share a schedule: a few rows, whatever the fleet (but one
-- per job for the H schedules among them).
WITH RECURSIVE unsucceeded AS (
    (SELECT d.schedule, d.timezone FROM job_definitions AS d
     WHERE d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
       AND (d.last_succeeded_at IS NULL OR d.last_succeeded_at < d.cursor_at)
       AND d.cursor_at > greatest(d.created_at, d.schedule_since)
     ORDER BY d.schedule, d.timezone LIMIT 1)
    UNION ALL
    SELECT n.schedule, n.timezone FROM unsucceeded AS u
    CROSS JOIN LATERAL (
        SELECT d.schedule, d.timezone FROM job_definitions AS d
        WHERE d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
          AND (d.last_succeeded_at IS NULL OR d.last_succeeded_at < d.cursor_at)
          AND d.cursor_at > greatest(d.created_at, d.schedule_since)
          AND (d.schedule, d.timezone) > (u.schedule, u.timezone)
        ORDER BY d.schedule, d.timezone LIMIT 1) AS n
), schedules AS (
    SELECT schedule, timezone FROM unsucceeded
    UNION
    SELECT d.schedule, d.timezone FROM job_definitions AS d
    WHERE d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
      AND (d.next_due_at IS NULL OR d.next_due_at <= %(now)s)
), hashed AS (
    SELECT s.*, strpos(lower(s.schedule), 'h') > 0 AND left(s.schedule, 1) <> '@' AS h
    FROM schedules AS s
)
SELECT s.schedule, s.timezone, NULL::text AS name FROM hashed AS s WHERE NOT s.h
UNION ALL
SELECT d.schedule, d.timezone, d.name
FROM hashed AS s
JOIN job_definitions AS d ON d.schedule = s.schedule AND d.timezone = s.timezone
WHERE s.h AND d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
  AND (d.next_due_at IS NULL OR d.next_due_at <= %(now)s
       OR ((d.last_succeeded_at IS NULL OR d.last_succeeded_at < d.cursor_at)
           AND d.cursor_at > greatest(d.created_at, d.schedule_since)));

-- name: job_problems
-- The verdict on the jobs, judged here: what is wrong with which job, the most serious
-- first, at most %(cap)s jobs (NULL: all), each row with the counts of all of them
-- (counted over every job with a problem, before the limit). A job has a problem when it
-- has dead runs nobody acknowledged, is invalid (as stored, or its schedule cannot be
-- evaluated: %(errors)s), or is overdue: not paused, and the slot before its latest
-- (%(befores)s, per schedule of health_schedules) came after it was defined (or its
-- schedule changed) and after its last success. Those jobs of a schedule are a range of
-- job_definitions_verdict_idx (the jobs of an H schedule: by name): only they are read. The
-- definition knows its last success to within a minute (last_succeeded_at); when that
-- leaves the answer open, the job's index is probed for the exact one, for that job alone.
-- With %(every)s, every job so probed is returned too (its exact last success, for
-- `status`), a problem or not.
-- The cost is the jobs judged: when 100,000 jobs are overdue at once (a queue nobody
-- claims: every job's slot came and went), each is read once, from the range of its
-- schedule, and kept as a few narrow columns; the counts are one pass over them, the order
-- a top-N, and only the jobs listed are read again for the rest of their columns (the
-- definitions once joined every judged job to its row, counted over a window and sorted
-- them all: 0.5 s for 100,000).
WITH keys AS (
    SELECT * FROM unnest(%(schedules)s::text[], %(timezones)s::text[], %(names)s::text[],
                         %(befores)s::timestamptz[], %(errors)s::text[])
        AS k (schedule, timezone, name, before, error)
), matched AS (
    -- a schedule shared by its jobs: those whose last success (or definition) is older
    -- than the slot before the latest
    -- (a range of job_definitions_verdict_idx per schedule; OFFSET 0 keeps the test of
    -- judged below out of it, where it would make the planner read every job it passes)
    SELECT d.*, k.before, k.error FROM keys AS k
    CROSS JOIN LATERAL (
        SELECT d.id, d.name, d.created_at, d.schedule_since, d.last_succeeded_at, d.cursor_at,
               d.next_due_at
        FROM job_definitions AS d
        WHERE d.schedule = k.schedule AND d.timezone = k.timezone
          AND greatest(d.created_at, d.schedule_since, d.last_succeeded_at) < k.before
          AND d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
        OFFSET 0) AS d
    WHERE k.name IS NULL AND k.error IS NULL
    UNION ALL
    -- a schedule of a job of its own (H: by name), or one that cannot be evaluated (its
    -- jobs that may be overdue, by job_definitions_unsucceeded_idx and the due index)
    SELECT d.*, k.before, k.error FROM keys AS k
    CROSS JOIN LATERAL (
        SELECT d.id, d.name, d.created_at, d.schedule_since, d.last_succeeded_at, d.cursor_at,
               d.next_due_at
        FROM job_definitions AS d
        WHERE d.name = k.name AND d.schedule = k.schedule AND d.timezone = k.timezone
          AND d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
          AND (k.error IS NOT NULL
               OR k.before > greatest(d.created_at, d.schedule_since, d.last_succeeded_at))
        OFFSET 0) AS d
    WHERE k.name IS NOT NULL
    UNION ALL
    -- (per key too: a join of the keys to the definitions could read the definitions
    -- first, every one, to find that no schedule failed)
    SELECT d.*, k.before, k.error FROM keys AS k
    CROSS JOIN LATERAL (
        SELECT d.id, d.name, d.created_at, d.schedule_since, d.last_succeeded_at, d.cursor_at,
               d.next_due_at
        FROM job_definitions AS d
        WHERE d.schedule = k.schedule AND d.timezone = k.timezone
          AND d.removed_at IS NULL AND d.paused_at IS NULL AND d.invalid_reason IS NULL
        OFFSET 0) AS d
    WHERE k.name IS NULL AND k.error IS NOT NULL
), judged AS (
    SELECT m.id, m.name, m.before, m.error,
           CASE WHEN m.error IS NULL AND m.last_succeeded_at IS NOT NULL
                     AND m.last_succeeded_at + interval '1 minute' >= m.before
                THEN (SELECT r.finished_at FROM job_runs AS r
                      WHERE r.definition_id = m.id AND r.status = 'succeeded'
                        AND r.stage <> 'queue'
                      ORDER BY r.id DESC LIMIT 1)
                ELSE m.last_succeeded_at END AS last_success_at
    FROM matched AS m
    -- (the jobs that may be overdue, as health_schedules found their schedules)
    WHERE m.next_due_at IS NULL OR m.next_due_at <= %(now)s
       OR ((m.last_succeeded_at IS NULL OR m.last_succeeded_at < m.cursor_at)
           AND m.cursor_at > greatest(m.created_at, m.schedule_since))
), dead AS (
    SELECT definition_id, count(*) AS n, max(id) AS latest
    FROM job_runs
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at)
    GROUP BY definition_id
), others AS (
    -- the jobs with a problem no schedule above found: dead runs nobody acknowledged, or
    -- invalid as stored (few, each read by id: a join could read every definition)
    SELECT d.* FROM (SELECT definition_id AS id FROM dead
                     UNION SELECT id FROM job_definitions
                     WHERE invalid_reason IS NOT NULL AND removed_at IS NULL) AS ids
    CROSS JOIN LATERAL (
        SELECT d.id, d.name, d.invalid_reason, d.last_succeeded_at AS last_success_at
        FROM job_definitions AS d
        WHERE d.id = ids.id AND d.removed_at IS NULL
        OFFSET 0) AS d
    WHERE NOT EXISTS (SELECT FROM judged AS j WHERE j.id = ids.id)
), problems AS (
    SELECT v.*, coalesce(dead.n, 0) AS dead_unacknowledged, dead.latest AS latest_dead_id,
           (dead.n > 0 OR v.invalid_reason IS NOT NULL OR v.overdue) IS TRUE AS problem
    FROM (SELECT j.id, j.name, j.error AS invalid_reason, j.last_success_at,
                 j.before AS overdue_since,
                 (j.error IS NULL AND j.before IS NOT NULL
                  AND (j.last_success_at IS NULL OR j.last_success_at < j.before)) AS overdue
          FROM judged AS j
          UNION ALL
          SELECT o.id, o.name, o.invalid_reason, o.last_success_at, NULL, false
          FROM others AS o) AS v
    LEFT JOIN dead ON dead.definition_id = v.id
), counts AS (
    SELECT count(*) FILTER (WHERE problem) AS jobs_with_problems,
           count(*) FILTER (WHERE dead_unacknowledged > 0) AS dead_jobs,
           coalesce(sum(dead_unacknowledged), 0)::bigint AS dead_runs,
           count(*) FILTER (WHERE invalid_reason IS NOT NULL) AS invalid_jobs,
           count(*) FILTER (WHERE overdue) AS overdue_jobs
    FROM problems
), listed AS (
    -- the most serious first: dead runs nobody acknowledged (the latest death first),
    -- invalid jobs, then overdue ones (the longest without a success first)
    SELECT * FROM problems
    WHERE problem OR %(every)s
    ORDER BY problem DESC, dead_unacknowledged > 0 DESC, latest_dead_id DESC NULLS LAST,
             invalid_reason IS NOT NULL DESC, last_success_at ASC NULLS FIRST, name
    LIMIT %(cap)s
)
SELECT d.id, d.name, d.schedule, d.timezone, d.created_at, d.schedule_since, d.paused_at,
       l.invalid_reason, l.last_success_at, l.dead_unacknowledged, l.latest_dead_id,
       d.cursor_at, d.next_due_at, l.overdue_since, l.overdue, l.problem, c.*
FROM listed AS l
JOIN job_definitions AS d ON d.id = l.id
CROSS JOIN counts AS c
ORDER BY l.problem DESC, l.dead_unacknowledged > 0 DESC, l.latest_dead_id DESC NULLS LAST,
         l.invalid_reason IS NOT NULL DESC, l.last_success_at ASC NULLS FIRST, l.name;

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
       (SELECT count(*) FROM job_runs WHERE definition_id = d.id
            AND cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at))
           AS dead_unacknowledged,
       (SELECT max(id) FROM job_runs WHERE definition_id = d.id
            AND cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at))
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
