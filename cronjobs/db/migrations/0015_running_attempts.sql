-- Migration 15: the attempts running now, as rows of job_attempts.
--
-- A claim writes no row for the attempt it opens (since this version): while it runs, an
-- attempt is its run's row in the queue (attempt, lease_owner, lease_token, started_at), and
-- finish_runs or reclaim_expired writes its job_attempts row when it ends. The readers of a
-- run's attempts (db/queries/runs.sql) add these rows to job_attempts'. An attempt an older
-- cronjobs opened, which wrote its row at the claim, is read from that row instead.
CREATE VIEW job_attempts_running AS
SELECT NULL::bigint AS id, r.id AS run_id, r.attempt, r.lease_owner AS worker, r.lease_token,
       r.started_at, NULL::timestamptz AS finished_at, 'running'::text AS outcome,
       NULL::integer AS exit_code, NULL::text AS error, NULL::text AS output_tail, r.stage,
       NULL::timestamptz AS retire_at
FROM job_runs_queue AS r
WHERE r.status = 'running' AND r.lease_token IS NOT NULL
  -- (a subquery per row, by job_attempts_queue_run_attempt_key: never a join the planner
  -- could make by reading the table whole)
  AND (SELECT a.run_id FROM job_attempts_queue AS a
       WHERE a.run_id = r.id AND a.attempt = r.attempt) IS NULL;
