-- Migration 9: the jobs in a run of failures, by index.

-- A success resets its job's count of consecutive failures (finish_runs); the jobs that
-- have one are found here instead of reading every definition at every finish. Partial:
-- the index holds only the jobs failing right now, usually none.
CREATE INDEX job_definitions_failing_idx
    ON job_definitions (id) WHERE consecutive_failures <> 0;
