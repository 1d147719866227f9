-- Migration 6: jobs as code.

-- Where a definition came from: NULL for one made by hand (`cronjobs define`), else the
-- source that `cronjobs apply` created it for (`--source`, the file's `source`, or the
-- file's name). `apply --prune` removes only the definitions of its own source.
ALTER TABLE job_definitions ADD COLUMN source text
    CONSTRAINT job_definitions_source_check CHECK (length(source) BETWEEN 1 AND 200);

-- One-off runs for a later time (`cronjobs trigger NAME --at TIME`): a run waits as
-- 'scheduled' (never claimed) until its time, when the tick applies the job's overlap
-- policy to it and queues it, or cancels it saying why.
ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('scheduled', 'queued', 'running', 'failed', 'succeeded', 'dead',
                      'cancelled'));
CREATE INDEX job_runs_scheduled_idx ON job_runs (eligible_at) WHERE status = 'scheduled';
