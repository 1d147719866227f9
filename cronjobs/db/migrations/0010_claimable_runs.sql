-- Migration 10: what makes a run claimable, as functions the planner inlines.

-- What makes a run claimable, written once: SQL functions of a row's columns, each one
-- expression the planner inlines where it is called (LANGUAGE sql, IMMUTABLE, not STRICT),
-- so that a query calling them on job_runs' columns reads the same indexes as one that
-- spelled the expression out. The claim (claim_runs) adds what only it checks: the worker
-- has the handler, the job's group has room, no exclusive run of the job is running.

-- A run that waits in the queue: for its first attempt (queued) or for a retry (failed).
-- (job_runs_claim_idx holds the runs that wait: its WHERE is this body, written out, as an
-- index's predicate must be.)
CREATE FUNCTION cronjobs_run_waits(status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT status IN ('queued', 'failed') $$;

-- A run that waits and whose time has come at the instant.
CREATE FUNCTION cronjobs_run_is_due(status text, eligible_at timestamptz,
                                    instant timestamptz) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT cronjobs_run_waits(status) AND eligible_at <= instant $$;

-- Whether a job lets a due run of its own start at the instant: a manual run always, any
-- other while the job is not paused or its pause has ended.
CREATE FUNCTION cronjobs_job_lets_run(trigger text, paused_at timestamptz,
                                      paused_until timestamptz, instant timestamptz)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT trigger = 'manual' OR paused_at IS NULL OR paused_until <= instant $$;
