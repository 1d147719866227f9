-- Least-privilege roles for cronjobs. Run as the owner of the cronjobs tables (the role
-- that ran `cronjobs migrate`), then grant the roles to login users:
--
--   psql -v ON_ERROR_STOP=1 -f deploy/roles.sql
--   CREATE ROLE tick_worker LOGIN PASSWORD '…' IN ROLE cronjobs_tick;
--   CREATE ROLE ops_person LOGIN PASSWORD '…' IN ROLE cronjobs_admin;
--
-- cronjobs_tick can run ticks (and `status`, `runs`, `show`, `explain`, `metrics`;
-- every tick applies the retention) but cannot define or change what a job runs: the columns that say what to run
-- are not writable by it, nor are group limits. cronjobs_admin can also define, apply,
-- pause, resume, remove, retry, trigger and cancel, and set group limits. Neither can
-- change the schema.
--
-- Session limits for login users (settings on a group role are not inherited), useful
-- behind PgBouncer, which does not pass cronjobs' own startup settings on:
--   ALTER ROLE tick_worker SET statement_timeout = '60s';
--   ALTER ROLE tick_worker SET lock_timeout = '10s';
--   ALTER ROLE tick_worker SET idle_in_transaction_session_timeout = '60s';

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cronjobs_tick') THEN
        CREATE ROLE cronjobs_tick NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cronjobs_admin') THEN
        CREATE ROLE cronjobs_admin NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO cronjobs_tick, cronjobs_admin;
GRANT SELECT ON cronjobs_migrations TO cronjobs_tick, cronjobs_admin;

-- The tick decides slots (cursor, next slot, invalid), pauses a job that keeps failing,
-- and writes runs, attempts, skips and its own records.
GRANT SELECT ON job_definitions TO cronjobs_tick;
GRANT UPDATE (cursor_at, next_due_at, invalid_reason, paused_at, paused_until, pause_note,
              consecutive_failures, last_succeeded_at, last_failed_at)
    ON job_definitions TO cronjobs_tick;
-- runs and attempts: the parents, and the partitions the tick addresses by name (the
-- queue, the history's default and kept runs; the day partitions are reached through
-- their parents, and made and dropped by the two functions below, which run as the owner)
GRANT SELECT, INSERT, UPDATE, DELETE
    ON job_runs, job_runs_queue, job_runs_history, job_runs_history_default, job_runs_kept,
       job_attempts, job_attempts_queue, job_attempts_history, job_attempts_history_default,
       job_attempts_kept, job_ticks
    TO cronjobs_tick;
GRANT USAGE ON SEQUENCE job_runs_id_seq, job_attempts_id_seq TO cronjobs_tick;
GRANT SELECT ON job_attempts_running TO cronjobs_tick;  -- a view of the queue (schema.sql)
GRANT SELECT, INSERT, DELETE ON job_skips TO cronjobs_tick;
GRANT SELECT, INSERT, DELETE ON job_notifications TO cronjobs_tick;
-- retention: the tick reads the settings and records what it retired
GRANT SELECT, UPDATE (retired_before, upkept_at) ON cronjobs_retention TO cronjobs_tick;
GRANT EXECUTE ON FUNCTION cronjobs_add_history_day(date), cronjobs_drop_history_day(date)
    TO cronjobs_tick;
-- Group limits: the tick reads them and locks a group's row while it claims (FOR UPDATE
-- needs UPDATE on one column: updated_at, which changes nothing a limit means).
GRANT SELECT, UPDATE (updated_at) ON job_groups TO cronjobs_tick;

-- An administrator does everything the tick does, and defines jobs.
GRANT cronjobs_tick TO cronjobs_admin;
GRANT INSERT, UPDATE ON job_definitions TO cronjobs_admin;
GRANT INSERT, UPDATE, DELETE ON job_groups TO cronjobs_admin;
GRANT UPDATE ON cronjobs_retention TO cronjobs_admin;
