-- Migration 13: the indexes the verdict on the jobs judges with (job_problems,
-- health_schedules in db/queries/reports.sql), whatever the number of jobs.
--
-- The jobs that may be overdue (a slot has come since their last success, as the definition
-- knows it) by schedule and time zone: health_schedules reads each distinct schedule once,
-- skipping along this index, instead of every such job. It replaces the index of the same
-- predicate by id, which only the verdict read.
-- A job, by schedule and time zone, by the later of when it was defined (or its schedule
-- changed) and its last success: the jobs of a schedule overdue at an instant are a range of
-- it (those before the slot before the latest), so job_problems reads only them.
-- The handler jobs, by handler: waiting_for_handlers (every tick, and the verdict) finds the
-- handler jobs nobody loaded through it, instead of reading every job (command jobs too).
-- No lock but CREATE INDEX's (job_definitions holds one row per job: seconds at most).

DROP INDEX job_definitions_unsucceeded_idx;
CREATE INDEX job_definitions_unsucceeded_idx
    ON job_definitions (schedule, timezone)
    WHERE removed_at IS NULL AND paused_at IS NULL AND invalid_reason IS NULL
      AND (last_succeeded_at IS NULL OR last_succeeded_at < cursor_at)
      AND cursor_at > greatest(created_at, schedule_since);
CREATE INDEX job_definitions_verdict_idx
    ON job_definitions (schedule, timezone,
                        (greatest(created_at, schedule_since, last_succeeded_at)))
    WHERE removed_at IS NULL AND paused_at IS NULL AND invalid_reason IS NULL;
CREATE INDEX job_definitions_handler_idx
    ON job_definitions (handler) WHERE kind = 'handler';
