-- The forecast of the fleet's load and the capacity it has shown (cronjobs/db/stores/forecast.py).

-- name: forecast_jobs
-- Every job the forecast expands (not removed, not marked invalid), in groups that share
-- a schedule as written, a zone, a kind and a pause: fleets share few schedules, so a few
-- hundred rows carry 100,000 jobs. A schedule with H (a field, not a macro) is each job's
-- own: its name decides it. The forecast reads the pause: a paused job fires only after
-- its pause's end (paused_until), one paused without an end not at all.
SELECT schedule, timezone, kind, max(paused_at) AS paused_at, paused_until,
       array_agg(name ORDER BY name) AS names, array_agg(id ORDER BY name) AS ids
FROM job_definitions
WHERE removed_at IS NULL AND invalid_reason IS NULL
GROUP BY schedule, timezone, kind, paused_at IS NULL, paused_until,
         CASE WHEN schedule ~* 'h' AND schedule !~ '^\s*@' THEN name END
ORDER BY min(name);

-- name: forecast_one_off_runs
-- One-off runs (`trigger --at`) waiting for a time in [start, end), with their job.
SELECT r.definition_id, d.name, d.kind, r.eligible_at AS at
FROM job_runs_queue AS r JOIN job_definitions AS d ON d.id = r.definition_id
WHERE r.status = 'scheduled' AND r.eligible_at >= %(start)s AND r.eligible_at < %(end)s
  AND d.removed_at IS NULL
ORDER BY r.eligible_at, r.id;

-- name: run_capacity
-- The rate at which this deployment has started runs when many were due at once, per run
-- mode (the job's kind: a shell command or a handler), from the first attempts of the
-- scheduled runs among the latest 100,000 finished since %(since)s (newest first through
-- job_runs_*_finished_idx: the cost stays bounded however busy the week was): every slot
-- that 2 or more runs of one kind shared is a burst, drained from its first start to its
-- last; the rate is the runs after the first over the seconds it took, summed over the
-- bursts.
WITH recent AS (
    SELECT r.definition_id, r.scheduled_for, r.started_at, r.trigger, r.attempt
    FROM job_runs AS r
    WHERE r.finished_at >= %(since)s AND r.stage <> 'queue'
    ORDER BY r.finished_at DESC
    LIMIT 100000
), bursts AS (
    SELECT d.kind, count(*) AS runs,
           extract(epoch FROM max(r.started_at) - min(r.started_at))::float8 AS seconds
    FROM recent AS r JOIN job_definitions AS d ON d.id = r.definition_id
    WHERE r.trigger = 'schedule' AND r.attempt = 1 AND r.started_at IS NOT NULL
    GROUP BY d.kind, r.scheduled_for
    HAVING count(*) >= 2
)
SELECT kind, count(*)::bigint AS bursts, sum(runs)::bigint AS runs,
       max(runs)::bigint AS largest, sum(seconds)::float8 AS seconds
FROM bursts
GROUP BY kind
ORDER BY kind;

-- name: typical_run_times
-- The median run time of each job of %(ids)s over its last 20 succeeded first attempts
-- (its index of runs newest first, in each partition): jobs without one are left out.
SELECT d.id AS definition_id, d.name, t.runs, t.seconds
FROM job_definitions AS d
CROSS JOIN LATERAL (
    SELECT count(*)::integer AS runs,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY last.seconds)::float8 AS seconds
    FROM (SELECT extract(epoch FROM r.finished_at - r.started_at)::float8 AS seconds
          FROM job_runs AS r
          WHERE r.definition_id = d.id AND r.stage <> 'queue' AND r.status = 'succeeded'
            AND r.attempt = 1 AND r.started_at IS NOT NULL
          ORDER BY r.id DESC
          LIMIT 20) AS last
) AS t
WHERE d.id = ANY(%(ids)s::bigint[]) AND t.runs > 0
ORDER BY d.name;
