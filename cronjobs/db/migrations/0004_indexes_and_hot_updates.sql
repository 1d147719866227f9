-- Migration 4: every foreign key has an index, and heartbeats can be HOT updates.

-- Deleting a tick (prune) sets job_runs.tick_id and job_skips.tick_id to NULL, and deleting
-- a run sets job_runs.retry_of to NULL: each looks its referencing rows up through these
-- indexes instead of scanning the table. Partial: most rows refer to nothing.
CREATE INDEX job_runs_tick_idx ON job_runs (tick_id) WHERE tick_id IS NOT NULL;
CREATE INDEX job_runs_retry_of_idx ON job_runs (retry_of) WHERE retry_of IS NOT NULL;
CREATE INDEX job_skips_tick_idx ON job_skips (tick_id) WHERE tick_id IS NOT NULL;

-- A heartbeat changes heartbeat_at and lease_expires_at only. The lease index was keyed on
-- lease_expires_at, so no heartbeat could be a HOT update; reclaiming finds the expired
-- among the (few) running runs instead.
DROP INDEX job_runs_lease_idx;
CREATE INDEX job_runs_running_idx ON job_runs (started_at) WHERE status = 'running';

-- Each job's latest run of each final status, found without reading its history (prune
-- always keeps them; cronjobs status reads them).
CREATE INDEX job_runs_latest_idx
    ON job_runs (definition_id, status, finished_at) WHERE finished_at IS NOT NULL;

-- Room on every page for the new versions of HOT updates (heartbeats, cancel requests).
ALTER TABLE job_runs SET (fillfactor = 90);
