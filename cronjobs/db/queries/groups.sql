-- Groups and their limits (cronjobs/db/stores/groups.py).

-- name: set_group_limit
-- `cronjobs group set NAME --max-running N`: create or change a group's limit.
INSERT INTO job_groups (name, max_running, created_at, updated_at)
VALUES (%(name)s, %(max_running)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE
SET max_running = excluded.max_running, updated_at = excluded.updated_at;

-- name: remove_group_limit
-- `cronjobs group remove NAME`: its jobs stay in the group, without a limit.
DELETE FROM job_groups WHERE name = %(name)s RETURNING name;

-- name: group_usage
-- Every group (limited, or named by a job), or one: its limit (NULL: none), its jobs, its
-- runs holding a lease, and its due runs that wait (both in the hot table alone: planning a
-- statement over job_runs, every partition of the history, cost more than running it).
WITH names AS (
    SELECT name FROM job_groups
    UNION
    SELECT group_name FROM job_definitions
    WHERE group_name IS NOT NULL AND removed_at IS NULL
)
SELECT n.name, g.max_running,
       (SELECT count(*) FROM job_definitions AS d
        WHERE d.group_name = n.name AND d.removed_at IS NULL) AS jobs,
       (SELECT count(*) FROM job_runs_queue AS r
        JOIN job_definitions AS d ON d.id = r.definition_id
        WHERE d.group_name = n.name AND r.status = 'running') AS running,
       (SELECT count(*) FROM job_runs_queue AS r
        JOIN job_definitions AS d ON d.id = r.definition_id
        WHERE d.group_name = n.name
          AND cronjobs_run_is_due(r.status, r.eligible_at, %(now)s)) AS waiting
FROM names AS n LEFT JOIN job_groups AS g ON g.name = n.name
WHERE %(name)s::text IS NULL OR n.name = %(name)s::text
ORDER BY n.name;

-- name: group_jobs
SELECT name FROM job_definitions
WHERE group_name = %(name)s AND removed_at IS NULL
ORDER BY name;
