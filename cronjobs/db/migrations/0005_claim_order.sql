-- Migration 5: the claim reads only what it claims, however long the queue; lost ticks
-- are closed.

-- An index whose order is the claim's order: runs of the job's own schedule (and manual
-- runs, retries) before backfilled ones, then by eligible_at, then by id, so that a claim
-- of N runs is a range scan of its first entries that stops after them. It replaces
-- job_runs_due_idx, whose ties (every run of a backfill is eligible at the same instant)
-- were in no order a query could name, so that the claim sorted the whole queue.
DROP INDEX job_runs_due_idx;
CREATE INDEX job_runs_claim_idx
    ON job_runs ((trigger = 'backfill'), eligible_at, id) WHERE status IN ('queued', 'failed');

-- A tick whose process or database went away before it recorded its end stayed 'running'
-- for ever; the next tick closes it as 'lost' (close_lost_ticks), finding the running ticks
-- through this index (a handful, however long the history).
ALTER TABLE job_ticks DROP CONSTRAINT job_ticks_status_check;
ALTER TABLE job_ticks ADD CONSTRAINT job_ticks_status_check
    CHECK (status IN ('running', 'finished', 'failed', 'interrupted', 'lost'));
CREATE INDEX job_ticks_running_idx ON job_ticks (tick_at) WHERE status = 'running';
-- the lost ones, newest first (cronjobs status shows them)
CREATE INDEX job_ticks_lost_idx ON job_ticks (finished_at) WHERE status = 'lost';
