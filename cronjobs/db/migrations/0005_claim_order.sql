-- Migration 5: the claim reads only what it claims, however long the queue.

-- An index whose order is the claim's order: runs of the job's own schedule (and manual
-- runs, retries) before backfilled ones, then by eligible_at, then by id, so that a claim
-- of N runs is a range scan of its first entries that stops after them. It replaces
-- job_runs_due_idx, whose ties (every run of a backfill is eligible at the same instant)
-- were in no order a query could name, so that the claim sorted the whole queue.
DROP INDEX job_runs_due_idx;
CREATE INDEX job_runs_claim_idx
    ON job_runs ((trigger = 'backfill'), eligible_at, id) WHERE status IN ('queued', 'failed');
