-- Migration 19: "a dead run nobody acknowledged", written once.
--
-- The rule was spelled out in the indexes below and in every query that counts, lists,
-- acknowledges or keeps such runs. It is now one SQL function, inlined by the planner like
-- the claimable ones (LANGUAGE sql, IMMUTABLE, not STRICT): the queries call it, and so do
-- the indexes' predicates (PostgreSQL inlines the function in an index's predicate as in a
-- query, so a query that calls it reads the index; tests/integration/test_query_plans.py
-- checks it). The indexes are made again with the same names and the same rows.
-- Building them reads the history once (the dead runs are few, and only they are indexed)
-- and holds off the finishes' inserts into it meanwhile.

-- A dead run nobody acknowledged since it died: an acknowledgement applies to the death it
-- acknowledged (acknowledged_at at or after finished_at), so dying again needs another.
CREATE FUNCTION cronjobs_run_dead_unacknowledged(status text, acknowledged_at timestamptz,
                                                 finished_at timestamptz) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT status = 'dead' AND (acknowledged_at IS NULL OR acknowledged_at < finished_at) $$;

DROP INDEX job_runs_history_unacknowledged_idx;
DROP INDEX job_runs_kept_unacknowledged_idx;
CREATE INDEX job_runs_history_unacknowledged_idx
    ON job_runs_history (definition_id)
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at);
CREATE INDEX job_runs_kept_unacknowledged_idx
    ON job_runs_kept (definition_id)
    WHERE cronjobs_run_dead_unacknowledged(status, acknowledged_at, finished_at);
