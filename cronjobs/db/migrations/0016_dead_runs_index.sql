-- Migration 16: the dead runs of the history, by their finish.
--
-- `status`, /healthz, /metrics and the dashboard count the runs that died in the last day
-- (health in db/queries/reports.sql). Through the history's index by finish, that count read
-- every run of the day to keep the dead ones (about 30 ms at 144,000 runs a day, in every
-- verdict). Dead runs are few, and these indexes hold only them: a run that succeeds writes
-- nothing to them.
-- Building them reads the history once and holds off the finishes' inserts into it meanwhile
-- (0.4 s with 2,000,000 runs kept: a tick's finish waits that long, within its lock_timeout).
CREATE INDEX job_runs_history_dead_idx ON job_runs_history (finished_at)
    WHERE status = 'dead';
CREATE INDEX job_runs_kept_dead_idx ON job_runs_kept (finished_at) WHERE status = 'dead';
