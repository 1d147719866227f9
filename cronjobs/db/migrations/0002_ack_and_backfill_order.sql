-- Migration 2: a dead run keeps `cronjobs status --check` red until a person acknowledges
-- it (`cronjobs ack`, or `cronjobs retry`). A dead run is acknowledged when acknowledged_at
-- is at or after its finished_at, so a retried run that dies again needs a new one.

ALTER TABLE job_runs ADD COLUMN acknowledged_at timestamptz;
ALTER TABLE job_runs ADD COLUMN acknowledged_by text;

CREATE INDEX job_runs_unacknowledged_idx
    ON job_runs (definition_id)
    WHERE status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at);

-- Backfilled runs are claimed after every other due run (claim_runs scans in this order):
-- a backfill of thousands of slots never holds up the job's own schedule, nor other jobs.
DROP INDEX job_runs_due_idx;
CREATE INDEX job_runs_due_idx
    ON job_runs ((trigger = 'backfill'), eligible_at) WHERE status IN ('queued', 'failed');
