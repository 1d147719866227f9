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

-- Limits across jobs: a job may belong to a group (`--group NAME`), and a group may have a
-- fleet-wide limit (`cronjobs group set NAME --max-running N`): at most N runs of its jobs
-- hold a lease at once, whatever the number of ticks. A group without a row has no limit.
ALTER TABLE job_definitions ADD COLUMN group_name text
    CONSTRAINT job_definitions_group_name_check
    CHECK (group_name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');
CREATE INDEX job_definitions_group_idx
    ON job_definitions (group_name) WHERE group_name IS NOT NULL;
CREATE TABLE job_groups (
    name         text PRIMARY KEY
        CONSTRAINT job_groups_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    max_running  integer NOT NULL
        CONSTRAINT job_groups_max_running_check CHECK (max_running BETWEEN 1 AND 10000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
